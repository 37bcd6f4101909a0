"""The one error type for an object that cannot be decoded or fails validation."""


class InvalidObject(ValueError):
    """An object that Quotient refuses, with a reason an admin can act on."""

    def __init__(self, kind: str, name: str, reason: str):
        self.kind, self.name, self.reason = kind, name, reason
        super().__init__(f"{kind} {name}: {reason}")
