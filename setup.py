"""Builds torchneuron._C with CMake + Ninja; metadata lives in pyproject.toml."""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def configured_levels(build_dir):
    """TORCHNEURON_CPU_LEVELS as the build directory's CMake cache has it."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as cache:
            for line in cache:
                if line.startswith("TORCHNEURON_CPU_LEVELS:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


class CMakeBuild(build_ext):
    """Configures and builds the CMake project, then places _C next to the Python package."""

    def build_extension(self, ext):
        build_dir = os.path.join(ROOT, "build")
        # TORCHNEURON_CPU_LEVELS (all, supported, highest or level names) reconfigures when it
        # changes; unset, a configured build keeps its levels and a new one builds "supported".
        levels = os.environ.get("TORCHNEURON_CPU_LEVELS", "")
        configured = configured_levels(build_dir)
        if levels == "highest" and configured in ("supported", "all"):
            levels = configured  # those include the highest: no need to drop the others
        if not os.path.exists(os.path.join(build_dir, "build.ninja")) or (levels and levels != configured):
            subprocess.check_call(
                ["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", f"-DPython3_EXECUTABLE={sys.executable}",
                 "-DCMAKE_BUILD_TYPE=Release", f"-DTORCHNEURON_CPU_LEVELS={levels or 'supported'}"])
        jobs = os.environ.get("TORCHNEURON_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "-j", jobs])
        built = [f for f in os.listdir(build_dir) if f.startswith("_C.") and f.endswith(".so")]
        if not built:
            raise RuntimeError(f"CMake finished but produced no _C extension in {build_dir}")
        source = os.path.join(build_dir, built[0])
        target = self.get_ext_fullpath(ext.name)
        # Editable installs import from the source tree, so the module always lands there too,
        # with lib/: the runtime and one kernel library per instruction-set level.
        for package_dir in {os.path.dirname(os.path.abspath(target)), os.path.join(ROOT, "torchneuron")}:
            os.makedirs(package_dir, exist_ok=True)
            # A new file renamed into place: processes running the old module keep their mapping
            # (copying over it in place would truncate what they run: SIGBUS).
            staged = os.path.join(package_dir, built[0] + ".new")
            shutil.copyfile(source, staged)
            os.replace(staged, os.path.join(package_dir, built[0]))
            lib_dir = os.path.join(package_dir, "lib")
            shutil.rmtree(lib_dir, ignore_errors=True)
            shutil.copytree(os.path.join(build_dir, "lib"), lib_dir)


# A wheel (`make wheel`) stages its files in build/setuptools, apart from the CMake tree in build/
# that CMakeBuild reuses; a package with an extension module is tagged for this Python's ABI and
# platform (cp311-cp311-linux_x86_64), not py3-none-any.
setup(ext_modules=[Extension("torchneuron._C", sources=[])], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": os.path.join("build", "setuptools")}})
