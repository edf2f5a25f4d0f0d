// The pybind11 module torchneuron._C: device and queue control, fallback accounting, fault
// injection for tests, and the Python launch-site capture used in device error messages.
#include <Python.h>
#include <frameobject.h>
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && !defined(Py_GIL_DISABLED)
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#endif
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ATen/ops/empty.h>
#include <torch/csrc/Generator.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aten/adaptive/adaptive_eager.h"
#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/device/generator.h"
#include "kernels/parallel.h"
#include "runtime/device.h"
#include "runtime/event.h"
#include "runtime/errors.h"

namespace py = pybind11;
namespace rt = torchneuron::runtime;

namespace torchneuron::python {
namespace {

// Source folders of torch and torchneuron: frames inside them are skipped so that an error
// names the user's line, not a library line.
std::vector<std::string>& library_prefixes() {
  static auto* prefixes = new std::vector<std::string>();
  return *prefixes;
}

bool is_library_file(const char* file) {
  for (const std::string& prefix : library_prefixes()) {
    if (std::strncmp(file, prefix.c_str(), prefix.size()) == 0) return true;
  }
  return false;
}

// What the site capture needs of a code object, computed once: every launch walks the stack,
// so this keeps string work off the per-op path. Entries hold a reference to their code object
// so that an address is never reused by another one. Only touched with the GIL held.
struct CodeSite {
  bool library;
  std::string file;
  std::unordered_map<int, const char*> sites;  // interned "file:line" by instruction offset
};

// Every "file:line" a command has carried, kept for the life of the process: queued commands
// point into it, and forget_code_sites() must not free a string a command still holds. Source
// files have finitely many lines; code made at run time (exec, FX's recompile, Dynamo) may
// bring new names without end, so past kMaxGeneratedSites its sites share one text.
constexpr size_t kMaxGeneratedSites = 16384;

const char* intern_site(std::string text) {
  static auto* interned = new std::unordered_set<std::string>();
  static size_t generated = 0;
  auto it = interned->find(text);
  if (it != interned->end()) return it->c_str();
  if (text.front() == '<' && ++generated > kMaxGeneratedSites) return "<generated code>";
  return interned->insert(std::move(text)).first->c_str();
}

std::unordered_map<PyCodeObject*, CodeSite>& code_sites() {
  static auto* sites = new std::unordered_map<PyCodeObject*, CodeSite>();
  return *sites;
}

void forget_code_sites() {
  for (auto& entry : code_sites()) Py_DECREF(entry.first);
  code_sites().clear();
}

void forget_cached_frames();

// The code objects a launch site was read from, each held (see CodeSite) until this many are:
// then all are let go, so code made at run time is not kept alive by this cache.
constexpr size_t kMaxCodeSites = 4096;

CodeSite& code_site(PyCodeObject* code) {
  auto* sites = &code_sites();
  auto it = sites->find(code);
  if (it != sites->end()) return it->second;
  if (sites->size() >= kMaxCodeSites) {
    forget_cached_frames();  // per-thread caches may name a code object about to be freed
    forget_code_sites();
  }
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  if (file == nullptr) PyErr_Clear();
  Py_INCREF(code);
  CodeSite site{file == nullptr || is_library_file(file), file != nullptr ? file : "?", {}};
  return sites->emplace(code, std::move(site)).first->second;
}

// Line numbers come from decoding the code object's line table, so each call site is decoded
// once and its text kept.
const char* format_site(CodeSite& site, PyCodeObject* code, int lasti) {
  auto [it, inserted] = site.sites.try_emplace(lasti);
  if (inserted) it->second = intern_site(site.file + ":" + std::to_string(PyCode_Addr2Line(code, lasti)));
  return it->second;
}

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && !defined(Py_GIL_DISABLED)
// CPython 3.11: torch releases the GIL around every op, and taking it back to read the stack
// cost more than the rest of a tiny op's launch. The calling thread's own frames cannot change
// while it runs this C++ code, so the stack is read without the GIL through the interpreter's
// frame records, and each (code object, instruction) is looked up in a per-thread cache. Cached
// code objects stay alive through code_sites(), so an address in the cache is never reused.
// Only a miss takes the GIL.
struct CachedFrame {
  PyCodeObject* code;
  int lasti;
  uint32_t generation;  // 0: empty; forget_code_sites() makes older entries stale
  bool library;
  const char* site;
};
constexpr size_t kFrameCacheSize = 512;
thread_local CachedFrame t_frame_cache[kFrameCacheSize];
std::atomic<uint32_t> g_frame_cache_generation{1};

CachedFrame& cache_slot(PyCodeObject* code, int lasti) {
  const auto key = reinterpret_cast<uintptr_t>(code) ^ (static_cast<uintptr_t>(lasti) << 4);
  return t_frame_cache[(key ^ (key >> 9)) % kFrameCacheSize];
}

// The innermost frame outside torch and torchneuron as "file:line"; the innermost frame when
// all are library frames; nullptr when a frame is not cached yet and `have_gil` is false.
const char* walk_frames(PyThreadState* thread, bool have_gil) {
  const uint32_t generation = g_frame_cache_generation.load(std::memory_order_relaxed);
  const char* innermost = nullptr;
  _PyInterpreterFrame* frame = thread->cframe != nullptr ? thread->cframe->current_frame : nullptr;
  for (int depth = 0; frame != nullptr && depth < 64; frame = frame->previous) {
    if (_PyFrame_IsIncomplete(frame)) continue;  // not started yet; Python's own walks skip these
    ++depth;
    PyCodeObject* code = frame->f_code;
    const int lasti = _PyInterpreterFrame_LASTI(frame) * static_cast<int>(sizeof(_Py_CODEUNIT));
    CachedFrame& slot = cache_slot(code, lasti);
    if (slot.generation != generation || slot.code != code || slot.lasti != lasti) {
      if (!have_gil) return nullptr;
      CodeSite& info = code_site(code);
      slot = CachedFrame{code, lasti, generation, info.library, format_site(info, code, lasti)};
    }
    if (innermost == nullptr) innermost = slot.site;
    if (!slot.library) return slot.site;
  }
  return innermost != nullptr ? innermost : "";
}

void forget_cached_frames() { g_frame_cache_generation.fetch_add(1); }

const char* python_launch_site() {
  PyThreadState* thread = PyGILState_GetThisThreadState();
  if (thread == nullptr || !Py_IsInitialized() || _Py_IsFinalizing()) return "";
  const bool have_gil = PyGILState_Check() != 0;
  if (const char* site = walk_frames(thread, have_gil)) return site;
  const PyGILState_STATE gil = PyGILState_Ensure();
  const char* site = walk_frames(thread, true);
  PyGILState_Release(gil);
  return site;
}
#else
void forget_cached_frames() {}

// The innermost Python frame outside torch and torchneuron, as "file:line".
const char* python_launch_site() {
  if (!Py_IsInitialized() || _Py_IsFinalizing() || PyGILState_GetThisThreadState() == nullptr) {
    return "";
  }
  const PyGILState_STATE gil = PyGILState_Ensure();
  const char* site = nullptr;
  const char* innermost = nullptr;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  for (int depth = 0; frame != nullptr && depth < 64; ++depth) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    CodeSite& info = code_site(code);
    const char* here = format_site(info, code, PyFrame_GetLasti(frame));
    Py_DECREF(code);
    if (innermost == nullptr) innermost = here;
    if (!info.library) {
      site = here;
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
  if (site != nullptr) return site;
  return innermost != nullptr ? innermost : "";
}
#endif

aten::FallbackMode parse_mode(const std::string& mode) {
  if (mode == "warn") return aten::FallbackMode::kWarn;
  if (mode == "silent") return aten::FallbackMode::kSilent;
  if (mode == "error") return aten::FallbackMode::kError;
  throw rt::InvalidArgument("fallback mode must be 'warn', 'silent' or 'error', got '" + mode + "'");
}

const char* mode_name(aten::FallbackMode mode) {
  switch (mode) {
    case aten::FallbackMode::kWarn: return "warn";
    case aten::FallbackMode::kSilent: return "silent";
    case aten::FallbackMode::kError: return "error";
  }
  return "warn";
}

void register_exception_translators() {
  py::module_ torch = py::module_::import("torch");
  static py::object oom = torch.attr("OutOfMemoryError");
  static py::object accelerator_error = torch.attr("AcceleratorError");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const rt::OutOfMemoryError& e) {
      PyErr_SetString(oom.ptr(), e.what());
    } catch (const rt::DeviceFault& e) {
      PyErr_SetString(accelerator_error.ptr(), e.what());
    } catch (const rt::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const rt::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace
}  // namespace torchneuron::python

namespace torchneuron::python {
void register_compiler(py::module_& parent);  // compiler_bindings.cpp
void register_c10d(py::module_& parent);      // c10d_bindings.cpp
void register_memory(py::module_& parent);    // memory_bindings.cpp
}  // namespace torchneuron::python

PYBIND11_MODULE(_C, m) {
  using namespace torchneuron;
  python::register_compiler(m);
  python::register_c10d(m);
  python::register_memory(m);
  m.doc() = "torchneuron native extension: runtime control for the neuron device";
  python::register_exception_translators();
  rt::set_launch_site_provider(&python::python_launch_site);
  rt::set_blocking_wait_hooks(
      []() -> void* {
        if (!Py_IsInitialized() || _Py_IsFinalizing() || PyGILState_Check() == 0) return nullptr;
        return PyEval_SaveThread();
      },
      [](void* state) { PyEval_RestoreThread(static_cast<PyThreadState*>(state)); });
  aten::adaptive::set_drop_with_gil([](std::vector<at::Tensor>& tensors) {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) {
      tensors.clear();
      return;
    }
    py::gil_scoped_acquire gil;
    tensors.clear();
  });
#ifndef Py_GIL_DISABLED
  // Reference counts are read under the GIL. Free-threaded CPython has no such lock and its
  // counts are split per thread: there adaptive eager refuses to start (torchneuron/adaptive.py).
  aten::adaptive::set_python_only_preserved([](const std::vector<PyObject*>& wrappers, std::vector<char>& only) {
    only.assign(wrappers.size(), 0);
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    py::gil_scoped_acquire gil;
    for (size_t i = 0; i < wrappers.size(); ++i) {
      PyObject* wrapper = wrappers[i];
      const Py_ssize_t offset = Py_TYPE(wrapper)->tp_weaklistoffset;
      only[i] = Py_REFCNT(wrapper) == 1 &&
                (offset <= 0 || *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(wrapper) + offset) == nullptr);
    }
  });
#endif

  m.def("_set_library_prefixes", [](std::vector<std::string> prefixes) {
    python::library_prefixes() = std::move(prefixes);
    python::forget_cached_frames();
    python::forget_code_sites();
  });
  m.def("_device_count", [] { return rt::device_count(); });
  m.def("_compute_threads", [] {
    aten::follow_torch_threads();
    return kernels::compute_threads();
  });
  m.def("_is_initialized", [] { return rt::is_initialized(); });
  m.def("_is_in_bad_fork", [] { return rt::in_bad_fork(); });
  m.def("_hbm_capacity", [] { return rt::hbm_capacity_bytes(); });
  m.def("_current_device", [] { return rt::current_device(); });
  m.def("_set_device", [](int index) { rt::set_current_device(index); });
  // Starts device `index` (its allocator and queue), as torch.cuda.set_device initializes CUDA.
  m.def("_start_device", [](int index) { rt::device(index); });
  m.def("_synchronize", [](int index) { rt::device(index).synchronize(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("_launch_blocking", [] { return rt::launch_blocking(); });
  m.def("_set_launch_blocking", [](bool enabled) { rt::set_launch_blocking(enabled); });
  m.def("_inject_fault", [](int index, const std::string& message) {
    rt::Device& device = rt::device(index);
    rt::LaunchInfo info = rt::LaunchInfo::named("torchneuron.testing.inject_fault");
    info.site = rt::capture_launch_site();
    device.queue().submit(rt::current_stream(index), std::move(info),
                          [message] { throw rt::KernelError(message); });
  });
  auto generator = [](int index) {
    rt::check_device_index(index);
    return aten::default_generator(static_cast<c10::DeviceIndex>(index));
  };
  m.def("_default_generators", [generator]() {
    // New Python objects for the devices' default generators: torch.neuron keeps one tuple of them.
    py::tuple generators(rt::device_count());
    for (int index = 0; index < rt::device_count(); ++index) {
      generators[index] = py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(generator(index)));
    }
    return generators;
  });
  m.def("_seed", [generator](int index) {
    at::Generator gen = generator(index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.seed();
  });
  m.def("_initial_seed", [generator](int index) { return generator(index).current_seed(); });
  m.def("_get_rng_state", [generator](int index) {
    at::Generator gen = generator(index);
    std::lock_guard<std::mutex> lock(gen.mutex());
    at::Tensor state = gen.get_state();
    return py::bytes(static_cast<const char*>(state.data_ptr()), static_cast<size_t>(state.numel()));
  });
  m.def("_set_rng_state", [generator](int index, const std::string& state) {
    at::Generator gen = generator(index);
    at::Tensor tensor = at::empty({static_cast<int64_t>(state.size())}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(tensor.data_ptr(), state.data(), state.size());
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(tensor);
  });
  // torch.Event.elapsed_time rejects subclasses as its argument; torch.neuron.Event times
  // through the backend event handles that torch.Event exposes as event_id.
  m.def("_event_elapsed_ms", [](uintptr_t start, uintptr_t end) {
    if (start == 0 || end == 0) {
      throw rt::InvalidArgument("elapsed_time needs both events recorded first; call record() on each.");
    }
    if (!rt::Event::is_live(reinterpret_cast<const void*>(start)) ||
        !rt::Event::is_live(reinterpret_cast<const void*>(end))) {
      throw rt::InvalidArgument("elapsed_time: an event handle names no live neuron event; pass torch.neuron.Event objects.");
    }
    return reinterpret_cast<const rt::Event*>(start)->elapsed_ms(*reinterpret_cast<const rt::Event*>(end));
  }, py::call_guard<py::gil_scoped_release>());
  m.def("_fallback_counts", [] { return aten::fallback_counts(); });
  m.def("_reset_fallback_counts", [] { aten::reset_fallback_counts(); });
  m.def("_fallback_mode", [] { return std::string(python::mode_name(aten::fallback_mode())); });
  m.def("_set_fallback_mode", [](const std::string& mode) { aten::set_fallback_mode(python::parse_mode(mode)); });
  // torch.neuron._sleep: a command that holds the queue, as torch.cuda._sleep spins the GPU.
  m.def("_sleep", [](int index, int64_t microseconds) {
    rt::LaunchInfo info = rt::LaunchInfo::named("neuron::sleep");
    info.site = rt::capture_launch_site();
    aten::runtime_call([&] {
      rt::device(index).queue().submit(rt::current_stream(index), info, [microseconds] {
        std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
      });
    });
  }, py::call_guard<py::gil_scoped_release>());
  m.def("_adaptive_eager_enabled", [] { return aten::adaptive::enabled(); });
  // Holds the GIL: a flush that waits for a full queue releases it there (the blocking-wait hook).
  m.def("_set_adaptive_eager", [](bool on) { aten::adaptive::set_enabled(on); });
  m.def("_adaptive_eager_settings", [] {
    const auto s = aten::adaptive::settings();
    return std::unordered_map<std::string, int64_t>{
        {"backlog", s.backlog}, {"hot_after", s.hot_after}, {"max_ops", s.max_ops}, {"min_bytes", s.min_bytes}};
  });
  m.def("_set_adaptive_eager_settings", [](int64_t backlog, int64_t hot_after, int64_t max_ops, int64_t min_bytes) {
    aten::adaptive::set_settings({backlog, hot_after, max_ops, min_bytes});
  });
  m.def("_adaptive_eager_stats", [] {
    const auto s = aten::adaptive::stats();
    return std::unordered_map<std::string, int64_t>{
        {"ops_recorded", s.ops_recorded}, {"regions", s.regions}, {"regions_fused", s.regions_fused},
        {"regions_op_by_op", s.regions_op_by_op}, {"ops_fused", s.ops_fused}, {"plan_hits", s.plan_hits},
        {"plan_misses", s.plan_misses}, {"values_elided", s.values_elided}, {"flush_queue", s.flush_queue},
        {"flush_shape", s.flush_shape}, {"flush_full", s.flush_full}, {"flush_hazard", s.flush_hazard},
        {"flush_idle", s.flush_idle}, {"flush_stream", s.flush_stream}};
  });
  m.def("_reset_adaptive_eager_stats", [] { aten::adaptive::reset_stats(); });
}
