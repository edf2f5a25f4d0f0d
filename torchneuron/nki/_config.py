"""nl.NKIObject: the base of NKI kernels' configuration classes (keyword construction with class
defaults, as a dataclass)."""
import inspect


class _NKIObjectType(type):
    """Construction that also sets, by keyword, class attributes a config declares without an
    annotation (`section_idx = None` under @dataclass is no field, yet kernels pass it)."""

    def __call__(cls, *args, **kwargs):
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            return super().__call__(*args, **kwargs)
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return super().__call__(*args, **kwargs)
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in params and hasattr(cls, k)
                 and not callable(getattr(cls, k))}
        made = super().__call__(*args, **kwargs)
        for key, value in extra.items():
            object.__setattr__(made, key, value)
        return made


class NKIObject(metaclass=_NKIObjectType):
    """Base of kernel configuration classes: its annotated fields are set by keyword (or in
    order) with their class defaults, as a dataclass's are; @dataclass subclasses and classes
    with their own __init__ keep theirs. Class attributes without annotations are set by
    keyword too."""

    def __init_subclass__(cls, **kwargs):
        # A field declared without a value defaults to None, also under @dataclass (AWS's configs declare
        # fields that their own methods set after construction, and leave them out of the constructor).
        super().__init_subclass__(**kwargs)
        for name in cls.__dict__.get("__annotations__", {}):
            if name not in cls.__dict__ and not name.startswith("__"):
                setattr(cls, name, None)

    @classmethod
    def _nki_fields(cls):
        names = []
        for klass in reversed(cls.__mro__):
            for name in getattr(klass, "__annotations__", {}):
                if name not in names and not name.startswith("_"):
                    names.append(name)
        return names

    def __init__(self, *args, **kwargs):
        fields = self._nki_fields()
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__} takes {len(fields)} fields, got {len(args)} positional arguments")
        values = dict(zip(fields, args))
        for key, value in kwargs.items():
            if key not in fields:
                if hasattr(type(self), key) and not callable(getattr(type(self), key)):
                    object.__setattr__(self, key, value)
                    continue
                raise TypeError(f"{type(self).__name__} has no field {key!r}")
            if key in values:
                raise TypeError(f"{type(self).__name__}: field {key!r} given twice")
            values[key] = value
        for name in fields:
            if name not in values:
                if hasattr(type(self), name):
                    values[name] = getattr(type(self), name)
                elif self._optional(name):  # an Optional[...] field left out is None (AWS's kernels rely on it)
                    values[name] = None
                else:
                    raise TypeError(f"{type(self).__name__} is missing field {name!r}")
            object.__setattr__(self, name, values[name])

    @classmethod
    def _optional(cls, name) -> bool:
        """Whether field `name` is annotated Optional[...] (or a union with None)."""
        for klass in cls.__mro__:
            annotation = getattr(klass, "__annotations__", {}).get(name)
            if annotation is not None:
                text = annotation if isinstance(annotation, str) else repr(annotation)
                return text.startswith(("Optional[", "typing.Optional[")) or "None" in text.replace(" ", "").split("|")
        return False

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n, None)!r}" for n in self._nki_fields())
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n, None) == getattr(other, n, None) for n in self._nki_fields())

    __hash__ = object.__hash__
