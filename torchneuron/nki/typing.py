"""nki.typing: annotations kernels may use on their parameters."""


class tensor:
    """Annotates a kernel parameter as a tensor (optionally tensor[shape, dtype])."""

    def __class_getitem__(cls, item):
        return cls


class mutable_tensor(tensor):
    """Annotates a tensor parameter the kernel writes to."""


class scalar:
    """Annotates a kernel parameter as a compile-time scalar."""


__all__ = ["tensor", "mutable_tensor", "scalar"]
