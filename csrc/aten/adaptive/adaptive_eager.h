// Adaptive eager: while a device's queue is backlogged, pointwise ops are recorded into a
// region instead of enqueued, and the region reaches the queue as one command at the next
// thing that could observe it (see compiler/eager_region.h for how it runs).
#pragma once

#include <ATen/TensorIterator.h>
#include <c10/util/python_stub.h>

#include <atomic>
#include <cstdint>

#include "compiler/eager_region.h"

namespace torchneuron::aten::adaptive {

namespace detail {
extern std::atomic<bool> g_enabled;
}

// TORCHNEURON_ADAPTIVE_EAGER=1 turns it on at start; torchneuron.adaptive_eager() at run time.
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
void set_enabled(bool enabled);

// Whether the op `iter` describes may be recorded: its device is backlogged or holds a region.
// The only cost an idle device's ops pay: the caller checks it before building record()'s
// arguments.
bool may_record(const at::TensorIteratorBase& iter);

// Records the op that `iter` describes (laid out as `args`, run by `kernel`), for which
// may_record() said yes, when the region can take it. False: the caller enqueues it as usual.
bool record(const at::TensorIteratorBase& iter, const char* op, const kernels::ElementwiseArgs& args,
            compiler::ElementwiseKernel kernel);

// Sets only[i] to whether wrappers[i], a tensor's Python wrapper, is held only by the reference
// PyObject preservation gives it (no Python reference, no weak reference), read under the GIL:
// installed by the Python module. Without it (or while Python finalizes) nothing counts as dead.
using PythonOnlyPreserved = void (*)(const std::vector<PyObject*>& wrappers, std::vector<char>& only);
void set_python_only_preserved(PythonOnlyPreserved check);

// Clears `tensors` holding the GIL once (installed by the Python module).
using DropWithGil = void (*)(std::vector<at::Tensor>& tensors);
void set_drop_with_gil(DropWithGil drop);

// Puts the device's recorded ops on its queue now.
void flush(int device_index);

struct Settings {
  int64_t backlog = 0;    // a region opens when more commands than this are waiting
  int64_t hot_after = 0;  // a structure runs fused from its hot_after-th sighting on
  int64_t max_ops = 0;    // a region holding this many ops is flushed
  int64_t min_bytes = 0;  // an op whose output holds no more bytes than this opens no region
};
Settings settings();
void set_settings(const Settings& settings);

struct Stats {
  int64_t ops_recorded = 0, regions = 0, regions_fused = 0, regions_op_by_op = 0, ops_fused = 0;
  int64_t plan_hits = 0, plan_misses = 0, values_elided = 0;
  // Why regions ended: a command or sync reached the queue, the shape changed, the region was
  // full, a memory hazard, the device went idle, the stream changed.
  int64_t flush_queue = 0, flush_shape = 0, flush_full = 0, flush_hazard = 0, flush_idle = 0, flush_stream = 0;
};
Stats stats();
void reset_stats();  // and forgets every structure seen and any back-off

}  // namespace torchneuron::aten::adaptive
