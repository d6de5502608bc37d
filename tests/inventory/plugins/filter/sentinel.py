# A filter plugin found through ansible.cfg's filter_plugins.


def test(sentinel):
    return sentinel == 'test'


class FilterModule(object):
    def filters(self):
        return {'test': test}
