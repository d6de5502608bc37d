#!/usr/bin/python
# A custom module in the role's library/: echoes its input, counted.
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(words=dict(type="list", elements="str", required=True)),
        supports_check_mode=True,
    )
    words = module.params["words"]
    module.exit_json(changed=False, words=words, count=len(words), joined="-".join(words))


if __name__ == "__main__":
    main()
