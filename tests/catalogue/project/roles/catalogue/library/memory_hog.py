#!/usr/bin/python
# A module that allocates without end: the worker's memory limit must end
# it as its own task's failure, not the operator.
from ansible.module_utils.basic import AnsibleModule


def main():
    AnsibleModule(argument_spec={})
    hoard = []
    while True:
        hoard.append(bytearray(64 << 20))


if __name__ == "__main__":
    main()
