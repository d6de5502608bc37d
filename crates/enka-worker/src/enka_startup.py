"""What a worker's start does before ansible-core's imports, so that a start
after the idle exit repeats no work and imports only what a task needs.

- ansible-core parses the same YAML at every start: its configuration's
  definitions (config/base.yml, about 100 KB) and, at a worker's first plugin
  lookup, each collection's routing (ansible.builtin's is 370 KB); and it
  compiles the Jinja templates of some 26 configuration defaults, each in a
  new environment, and (from 2.19) the methods of some 40 dataclasses, which
  the dataclasses module writes as source. Each result is kept next to
  these scripts as marshal data (`_parsed_once`), keyed by what it came
  from.
- Two packages are imported whole where a task needs none of them:
  `ansible.module_utils.facts` (its __init__ imports every facts collector,
  for the controller's two imports of its submodules) and vault's
  cryptography (its bindings and OpenSSL backend, until something is
  encrypted or decrypted). Each now loads at its first use, through
  ansible-core's own code.
"""

import contextlib
import gc
import hashlib
import importlib.util
import marshal
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

_WRITE_BACKS = []


def prepare():
    """Sets all of the above up, then imports ansible.constants (which
    renders the configuration's defaults). `finish` ends what lasts only
    for the start's imports."""
    _keep_config_definitions()
    _keep_collection_routing()
    _defer_facts_collectors()
    _WRITE_BACKS.append(_compile_dataclass_methods_once())
    write_back = _compile_config_defaults_once()
    import ansible.constants  # noqa: F401

    write_back()
    _defer_vault_cryptography()


def finish():
    """After the start's imports: writes back what they compiled anew, and
    leaves later code (a plugin's dataclasses) to Python as it is."""
    while _WRITE_BACKS:
        _WRITE_BACKS.pop()()


@contextlib.contextmanager
def _collector_paused():
    """Pauses the collector while a parse builds many objects that all
    live on: in a worker with Ansible imported, the collections they set
    off would each walk every object for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parsed_once(key, parse, refresh=False):
    """`parse()` (a dict), kept next to these scripts as marshal data under
    `key`; with `refresh`, parsed and written again."""
    with _collector_paused():
        return _load_or_parse(key, parse, refresh)


def _load_or_parse(key, parse, refresh):
    name = "parsed-%s.marshal" % hashlib.blake2b(key.encode(), digest_size=12).hexdigest()
    cache = os.path.join(_HERE, name)
    if not refresh:
        try:
            with open(cache, "rb") as stream:
                # One read: marshal.load on a stream reads in small pieces.
                parsed = marshal.loads(stream.read())
            if isinstance(parsed, dict):
                return parsed
        except (OSError, EOFError, ValueError, TypeError):
            pass
    parsed = parse()
    partial = "%s.%d" % (cache, os.getpid())
    try:
        with open(partial, "wb") as stream:
            stream.write(marshal.dumps(parsed))
        os.replace(partial, cache)
    except (OSError, ValueError):
        # Not marshallable, or a read-only directory: parsed each time.
        with contextlib.suppress(OSError):
            os.unlink(partial)
    return parsed


def _keep_config_definitions():
    """base.yml's parse, keyed by the file's path, size and time."""
    from ansible.config import manager

    read = manager.ConfigManager._read_config_yaml_file

    def cached(self, yml_file):
        path = os.fsdecode(yml_file)
        try:
            stat = os.stat(path)
        except OSError:
            return read(self, yml_file)
        key = "config|%s|%d|%d|%s" % (path, stat.st_size, stat.st_mtime_ns, sys.version)
        return _parsed_once(key, lambda: read(self, yml_file))

    manager.ConfigManager._read_config_yaml_file = cached


def _keep_collection_routing():
    """A collection's meta/runtime.yml parse, keyed by its content, through
    the collection loader's documented hook for caching it."""
    from ansible.utils.collection_loader import _collection_finder as finder

    parse = finder._meta_yml_to_dict
    if parse is None:
        return

    def cached(yaml_string_data, content_id):
        data = yaml_string_data
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        digest = hashlib.blake2b(data, digest_size=20).hexdigest()
        key = "routing|%s|%s|%s" % (digest, parse.__module__, sys.version)
        return _parsed_once(key, lambda: parse(yaml_string_data, content_id))

    finder._meta_yml_to_dict = cached


class _CompiledOnce:
    """Code objects compiled once and kept by their source under `key`
    (`_parsed_once`); `write_back` adds those compiled since."""

    def __init__(self, key):
        self.key = key
        self.kept = _parsed_once(key, dict)
        self.compiled = {}

    def code(self, source, compile_source):
        code = self.kept.get(source) or self.compiled.get(source)
        if code is None:
            code = self.compiled[source] = compile_source(source)
        return code

    def write_back(self):
        if self.compiled:
            _parsed_once(self.key, lambda: {**self.kept, **self.compiled}, refresh=True)


def _compile_config_defaults_once():
    """The config manager's default templates compiled once: their code
    objects kept, keyed by the source, as Jinja's own bytecode cache keeps
    a loader's. Returns what writes newly compiled ones back."""
    import jinja2
    from ansible.config import manager

    native = manager.NativeEnvironment
    codes = _CompiledOnce("defaults|%s|%s" % (jinja2.__version__, sys.version))

    class CompiledOnce(native):
        def compile(self, source, name=None, filename=None, raw=False, defer_init=False):
            if isinstance(source, str) and (name, filename, raw, defer_init) == (None, None, False, False):
                return codes.code(source, super().compile)
            return super().compile(source, name, filename, raw, defer_init)

    manager.NativeEnvironment = CompiledOnce

    def write_back():
        manager.NativeEnvironment = native
        codes.write_back()

    return write_back


def _compile_dataclass_methods_once():
    """Has the dataclasses module run the source it writes for a class's
    methods (`__init__`, `__repr__`, `__eq__`, …) from code compiled once,
    keyed by that source (compiled as its `exec` would: no future flags,
    file "<string>"). Returns what writes newly compiled ones back and puts
    its `exec` back."""
    import builtins
    import dataclasses

    codes = _CompiledOnce("dataclasses|%s|%s" % (dataclasses.__file__, sys.version))

    def compile_as_exec(source):
        return compile(source, "<string>", "exec", dont_inherit=True)

    def exec_compiled(source, globals=None, locals=None):  # noqa: A002 - exec's own names
        if isinstance(source, str) and isinstance(globals, dict):
            source = codes.code(source, compile_as_exec)
        elif globals is None:
            caller = sys._getframe(1)
            globals, locals = caller.f_globals, caller.f_locals if locals is None else locals
        return builtins.exec(source, globals, locals)

    dataclasses.exec = exec_compiled

    def write_back():
        del dataclasses.exec
        codes.write_back()

    return write_back


def _is_submodule(package, name):
    for directory in package.__path__:
        path = os.path.join(directory, name)
        if os.path.exists(path + ".py") or os.path.isdir(path):
            return True
    return False


def _defer_facts_collectors():
    """`ansible.module_utils.facts` as a package whose own __init__ runs at
    the first use of a name of its own: importing a submodule is not one. A
    module that gathers facts runs it then."""
    name = "ansible.module_utils.facts"
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    package = importlib.util.module_from_spec(spec)

    def first_use(attribute):
        # `from ansible.module_utils.facts import timeout` asks for a
        # submodule, which the import system finds: not a use.
        if attribute.startswith("__") or _is_submodule(package, attribute):
            raise AttributeError(attribute)
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, attribute)

    package.__getattr__ = first_use
    sys.modules[name] = package
    import ansible.module_utils

    ansible.module_utils.facts = package


_VAULT = "ansible.parsing.vault"


class _CryptographyHiddenFromVault:
    """A finder that answers the vault module's own imports of
    cryptography (and those alone) as a Python without it would."""

    asked = False

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] != "cryptography":
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            frame = frame.f_back
        if frame is None or frame.f_globals.get("__name__") != _VAULT or frame.f_code.co_name != "<module>":
            return None
        cls.asked = True
        raise ModuleNotFoundError("deferred by enka until the vault's first use", name=name)


def _defer_vault_cryptography():
    """Imports ansible.parsing.vault without its cryptography, then has
    each of its ciphers, when first made (every encryption and decryption
    makes one), run the vault module's own import of it."""
    if _VAULT in sys.modules or "cryptography" in sys.modules:
        return
    sys.meta_path.insert(0, _CryptographyHiddenFromVault)
    try:
        vault = importlib.import_module(_VAULT)
    finally:
        sys.meta_path.remove(_CryptographyHiddenFromVault)
    mapping = getattr(vault, "CIPHER_MAPPING", None)
    if not _CryptographyHiddenFromVault.asked or not isinstance(mapping, dict):
        return
    ciphers = dict(mapping)

    def imported_first(cipher):
        def make(*args, **kwargs):
            _import_vault_cryptography(vault)
            mapping.update(ciphers)
            return cipher(*args, **kwargs)

        return make

    mapping.update({name: imported_first(cipher) for name, cipher in ciphers.items()})


def _import_vault_cryptography(vault):
    """Runs, in the vault module, its top-level `try:` statements that
    import cryptography: ansible-core's code, as it runs at import."""
    if getattr(vault, "HAS_CRYPTOGRAPHY", False):
        return
    import ast

    with open(vault.__file__, "rb") as handle:
        tree = ast.parse(handle.read(), vault.__file__)
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.Try)
        and any(
            isinstance(inner, ast.ImportFrom) and (inner.module or "").partition(".")[0] == "cryptography"
            for inner in ast.walk(node)
        )
    ]
    if not blocks:
        raise ImportError("enka found no import of cryptography in %s" % vault.__file__)
    code = compile(ast.Module(body=blocks, type_ignores=[]), vault.__file__, "exec")
    exec(code, vars(vault))  # noqa: S102 - the vault module's own statements
