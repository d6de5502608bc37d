# A Python filter plugin next to the role.


def reverse_words(text, separator=" "):
    return separator.join(reversed(text.split(separator)))


class FilterModule(object):
    def filters(self):
        return {"reverse_words": reverse_words}
