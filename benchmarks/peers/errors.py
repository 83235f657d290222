"""The one error a peer raises when it cannot run a variant here."""


class Unavailable(Exception):
    """This framework (or this variant of it) cannot run: the message says why."""
