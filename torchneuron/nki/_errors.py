"""The error a kernel gets when it breaks a rule of the Neuron Kernel Interface (the bottom layer
of torchneuron.nki: every other module may raise it)."""


class NKIError(ValueError):
    """A kernel broke a rule of the Neuron Kernel Interface (the message names the rule)."""
