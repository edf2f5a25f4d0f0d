// Recording pointwise ops while the device is backlogged, and flushing them as one command.
#include "aten/adaptive/adaptive_eager.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "aten/device/neuron_tensor.h"
#include "runtime/device.h"

namespace torchneuron::aten::adaptive {
namespace detail {

std::atomic<bool> g_enabled{[] {
  const char* value = std::getenv("TORCHNEURON_ADAPTIVE_EAGER");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}()};

}  // namespace detail

namespace {

// Chosen by bench/bench_adaptive.py (docs/adaptive_eager.md): more than 2 waiting commands
// means the host is ahead of the device; a structure fuses from its second sighting, so a
// model that never repeats a region runs it op by op; 64 ops bound a region's scratch.
std::atomic<int64_t> g_backlog{2};
std::atomic<int64_t> g_hot_after{2};
std::atomic<int64_t> g_max_ops{64};
// Below this many output bytes an op is not recorded: fusing ops whose values fit a core's L2
// saved no device time (20-op chains up to 64Ki float32 elements ran 3-6% slower fused), while
// recording costs the host more than a submit. From 96Ki elements on, fused ran 1.1-3.3x faster.
std::atomic<int64_t> g_min_bytes{256 << 10};
// The region holds every tensor it made until it is flushed, where eager mode would have freed
// the dead ones: past this many bytes of them, it is flushed.
constexpr int64_t kMaxMadeBytes = int64_t{256} << 20;

struct Counters {
  std::atomic<int64_t> ops_recorded{0}, regions{0}, regions_fused{0}, regions_op_by_op{0}, ops_fused{0};
  std::atomic<int64_t> plan_hits{0}, plan_misses{0}, values_elided{0};
  std::array<std::atomic<int64_t>, 6> flushes{};
};
Counters g_counters;

enum class Reason { kQueue, kShape, kFull, kHazard, kIdle, kStream };

// A region the device caught up with (it went idle while the host still recorded) only cost
// the host time: the host, not the device, was the bottleneck. After one, this many backlogged
// ops go straight to the queue, doubling with each such region in a row.
constexpr int64_t kFirstBackoff = 64;
constexpr int64_t kMaxBackoff = 4096;

struct DeviceRegion {
  std::atomic<int64_t> skip{0};  // backlogged ops still to send straight to the queue
  int64_t backoff = 0;           // the last back-off, under the mutex
  std::recursive_mutex mutex;
  compiler::EagerRegion region;
  std::vector<at::Tensor> keep_alive;  // one handle per distinct tensor the region reads or writes
  std::vector<int> owner;              // per access: the keep_alive index of the tensor made there, or -1
  runtime::StreamId stream = runtime::kDefaultStream;
};

DeviceRegion& region_of(int device) {
  static std::array<DeviceRegion, runtime::kMaxDevices> regions;
  return regions[device];
}

struct Structure {
  int64_t seen = 0;
  std::optional<compiler::RegionPlan> plan;
};
std::mutex g_structures_mutex;
std::unordered_map<std::string, Structure> g_structures;
constexpr size_t kMaxStructures = 4096;

thread_local bool t_flushing = false;
std::atomic<uint64_t> g_devices_recorded{0};  // bit i: device i has held a region

std::atomic<DropWithGil> g_drop_with_gil{nullptr};

// Tensor handles a flush let go of, dropped when this goes out of scope (after the region's
// lock). Dropping the last C++ reference to a tensor Python has seen takes the GIL: taken once
// for them all, rather than once per tensor by a thread that released it.
struct Released {
  std::vector<at::Tensor> tensors;
  Released() = default;
  Released(const Released&) = delete;
  Released& operator=(const Released&) = delete;
  ~Released() {
    if (tensors.empty()) return;
    DropWithGil drop = g_drop_with_gil.load();
    if (drop != nullptr) {
      drop(tensors);
    } else {
      tensors.clear();
    }
  }
};

void release_handles(DeviceRegion& d, Released& released) {
  for (at::Tensor& t : d.keep_alive) released.tensors.push_back(std::move(t));
  d.keep_alive.clear();
  d.owner.clear();
}

std::atomic<PythonOnlyPreserved> g_python_only_preserved{nullptr};

// Per keep_alive handle: whether nobody but the region holds that tensor. A tensor Python has
// seen keeps its wrapper alive while C++ holds it (PyObject preservation): then the wrapper's
// reference is ours too, if Python itself holds the wrapper no longer, which only a read of its
// reference count under the GIL can tell (one GIL acquisition for the whole region).
std::vector<char> only_region_holds(const DeviceRegion& d) {
  std::vector<char> only(d.keep_alive.size(), 0);
  std::vector<PyObject*> wrappers;
  std::vector<size_t> wrapped;
  for (size_t k = 0; k < d.keep_alive.size(); ++k) {
    const at::Tensor& tensor = d.keep_alive[k];
    if (tensor.weak_use_count() > 1) continue;
    PyObject* wrapper = tensor.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj();
    if (wrapper == nullptr) {
      only[k] = tensor.use_count() == 1;
    } else if (tensor.use_count() == 2) {
      wrappers.push_back(wrapper);
      wrapped.push_back(k);
    }
  }
  PythonOnlyPreserved preserved_only = g_python_only_preserved.load();
  if (wrappers.empty() || preserved_only == nullptr) return only;
  std::vector<char> python_free;
  preserved_only(wrappers, python_free);
  for (size_t i = 0; i < wrapped.size() && i < python_free.size(); ++i) only[wrapped[i]] = python_free[i];
  return only;
}

// Per access: whether nobody but the region holds what was made there once it has run.
std::vector<bool> dead_accesses(const DeviceRegion& d) {
  const auto& accesses = d.region.accesses();
  std::vector<bool> dead(accesses.size(), false);
  if (std::none_of(d.owner.begin(), d.owner.end(), [](int owner) { return owner >= 0; })) return dead;
  const std::vector<char> only = only_region_holds(d);
  for (size_t i = 0; i < accesses.size(); ++i) {
    if (d.owner[i] < 0) continue;
    const at::Tensor& made = d.keep_alive[d.owner[i]];
    const c10::StorageImpl* storage = made.storage().unsafeGetStorageImpl();
    // Every tensor on that memory (views the region read through too) must be the region's
    // alone, and the region's must be the storage's only references.
    size_t held = 0;
    bool only_ours = true;
    for (size_t k = 0; k < d.keep_alive.size(); ++k) {
      if (d.keep_alive[k].storage().unsafeGetStorageImpl() != storage) continue;
      ++held;
      only_ours = only_ours && only[k];
    }
    dead[i] = only_ours && made.storage().use_count() == held;
  }
  return dead;
}

// Takes the region's lock. A thread never blocks on it holding the GIL (the blocking-wait hooks
// release it meanwhile): a flush holding the lock may be waiting for the GIL to read Python's
// references, so lock -> GIL is the one order, and a GIL holder waiting here would close a cycle.
std::unique_lock<std::recursive_mutex> lock_region(DeviceRegion& d) {
  std::unique_lock<std::recursive_mutex> lock(d.mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    runtime::ScopedBlockingWait wait;
    lock.lock();
  }
  return lock;
}

// Flushes under the region's lock. The region's tensor handles move to `released`, to be
// dropped after the lock: dropping a tensor Python owns takes the GIL, which a thread waiting
// for the lock may hold.
void flush_locked(int device, DeviceRegion& d, Reason reason, Released& released) {
  if (d.region.empty()) return;
  std::optional<compiler::RegionPlan> plan;
  // A region of one op (the device went idle right after it) has nothing to fuse: it goes to
  // the queue as that op's own command, without the cost of a structure lookup.
  const bool single = d.region.size() == 1;
  const std::vector<bool> dead = single ? std::vector<bool>() : dead_accesses(d);
  const std::string key = single ? std::string() : d.region.structure_key(dead);
  if (!single) {
    std::lock_guard<std::mutex> lock(g_structures_mutex);
    if (g_structures.size() >= kMaxStructures) g_structures.clear();
    Structure& structure = g_structures[key];
    if (++structure.seen >= g_hot_after.load()) {
      if (structure.plan) {
        g_counters.plan_hits++;
      } else {
        structure.plan = d.region.plan(dead);
        g_counters.plan_misses++;
      }
      plan = structure.plan;
    }
  }
  const int64_t numel = d.region.numel();
  auto ops = std::make_shared<std::vector<compiler::RecordedOp>>(d.region.take_ops());
  if (!single) g_counters.regions++;
  g_counters.flushes[static_cast<int>(reason)]++;
  if (reason == Reason::kIdle) {
    d.backoff = std::clamp(d.backoff * 2, kFirstBackoff, kMaxBackoff);
    d.skip.store(d.backoff, std::memory_order_relaxed);
  } else if (!single) {
    d.backoff = 0;
  }
  runtime::HardwareQueue& queue = runtime::device(device).queue();
  queue.set_has_deferred_work(false);
  t_flushing = true;
  try {
    if (!plan) {
      if (!single) g_counters.regions_op_by_op++;
      for (compiler::RecordedOp& op : *ops) {
        runtime_call([&] {
          queue.submit(d.stream, op.info, [kernel = std::move(op.kernel), args = op.args] { kernel(args); });
        });
      }
    } else {
      g_counters.regions_fused++;
      g_counters.ops_fused += static_cast<int64_t>(ops->size());
      g_counters.values_elided += plan->elided;
      runtime::LaunchInfo info = runtime::LaunchInfo::named("adaptive_eager::region");
      info.site = ops->front().info.site;
      runtime_call([&] {
        queue.submit(d.stream, info, [ops, region_plan = std::move(*plan), numel] {
          compiler::run_region(*ops, region_plan, numel);
        });
      });
    }
  } catch (...) {
    t_flushing = false;
    release_handles(d, released);
    throw;
  }
  t_flushing = false;
  release_handles(d, released);
}

void flush_from_queue(int device) {
  if (t_flushing) return;
  DeviceRegion& d = region_of(device);
  Released released;  // dropped after the lock
  auto lock = lock_region(d);
  if (t_flushing) return;
  flush_locked(device, d, Reason::kQueue, released);
}

const bool g_flusher_installed = [] {
  runtime::set_deferred_work_flusher(&flush_from_queue);
  return true;
}();

int hold(DeviceRegion& d, const at::TensorBase& tensor) {
  for (size_t i = 0; i < d.keep_alive.size(); ++i) {
    if (d.keep_alive[i].unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl()) return static_cast<int>(i);
  }
  d.keep_alive.emplace_back(tensor);
  return static_cast<int>(d.keep_alive.size()) - 1;
}

}  // namespace

void set_python_only_preserved(PythonOnlyPreserved check) { g_python_only_preserved = check; }

void set_drop_with_gil(DropWithGil drop) { g_drop_with_gil = drop; }

void set_enabled(bool on) {
  if (!on) {
    const uint64_t devices = g_devices_recorded.load();
    for (int i = 0; i < runtime::kMaxDevices; ++i) {
      if (devices & (uint64_t{1} << i)) flush(i);
    }
  }
  detail::g_enabled = on;
}

namespace {

bool opens_regions(const at::TensorIteratorBase& iter) {
  return iter.numel() * static_cast<int64_t>(iter.element_size(0)) > g_min_bytes.load(std::memory_order_relaxed);
}

}  // namespace

bool may_record(const at::TensorIteratorBase& iter) {
  if (runtime::launch_blocking() || t_flushing || iter.device(0).type() != c10::DeviceType::PrivateUse1) return false;
  const int device = iter.device(0).index();
  const runtime::HardwareQueue& queue = runtime::device(device).queue();
  if (queue.has_deferred_work()) return true;
  if (!opens_regions(iter)) return false;
  if (!queue.depth_exceeds(static_cast<uint64_t>(g_backlog.load(std::memory_order_relaxed)))) return false;
  std::atomic<int64_t>& skip = region_of(device).skip;
  if (skip.load(std::memory_order_relaxed) > 0) {
    skip.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

bool record(const at::TensorIteratorBase& iter, const char* op, const kernels::ElementwiseArgs& args,
            compiler::ElementwiseKernel kernel) {
  const int device = iter.device(0).index();
  runtime::HardwareQueue& queue = runtime::device(device).queue();
  const int64_t backlog = g_backlog.load(std::memory_order_relaxed);

  // Outside the lock: the launch site takes the GIL, which a thread waiting for the lock may hold.
  runtime::LaunchInfo info;
  info.op = op;
  for (int k = iter.noutputs(); k < iter.ntensors() && info.num_inputs < 3; ++k) {
    if (iter.tensor_base(k).defined()) info.add_input(summarize(iter.tensor_base(k)));
  }
  info.site = runtime::capture_launch_site();

  DeviceRegion& d = region_of(device);
  Released released;  // dropped after the lock
  auto lock = lock_region(d);
  const runtime::StreamId stream = runtime::current_stream(device);
  // One read of the depth: it reads a cache line the queue's worker writes after every command.
  const int64_t depth = static_cast<int64_t>(queue.depth());
  if (!d.region.empty() && stream != d.stream) flush_locked(device, d, Reason::kStream, released);
  if (!d.region.empty() && depth == 0) flush_locked(device, d, Reason::kIdle, released);
  if (d.region.empty() && (depth <= backlog || !opens_regions(iter))) return false;

  auto result = d.region.add(kernel, args, info);
  if (result == compiler::EagerRegion::AddResult::kHazard || result == compiler::EagerRegion::AddResult::kOtherShape) {
    const bool hazard = result == compiler::EagerRegion::AddResult::kHazard;
    flush_locked(device, d, hazard ? Reason::kHazard : Reason::kShape, released);
    result = d.region.add(kernel, args, info);
  }
  if (result != compiler::EagerRegion::AddResult::kAdded) return false;
  d.stream = stream;
  d.owner.resize(d.region.accesses().size(), -1);
  const int output_access = d.region.ops().back().access[0];
  for (int k = 0; k < iter.ntensors(); ++k) {
    if (iter.device(k).type() != c10::DeviceType::PrivateUse1) continue;
    const int held = hold(d, iter.tensor_base(k));
    if (k == 0 && d.region.accesses()[output_access].written_first && d.owner[output_access] < 0) {
      d.owner[output_access] = held;
    }
  }
  queue.set_has_deferred_work(true);
  g_devices_recorded.fetch_or(uint64_t{1} << device, std::memory_order_relaxed);
  g_counters.ops_recorded++;
  if (d.region.size() >= g_max_ops.load() || d.region.made_bytes() > kMaxMadeBytes) {
    flush_locked(device, d, Reason::kFull, released);
  }
  return true;
}

void flush(int device_index) {
  if (!runtime::device(device_index).queue().has_deferred_work()) return;
  flush_from_queue(device_index);
}

Settings settings() { return {g_backlog.load(), g_hot_after.load(), g_max_ops.load(), g_min_bytes.load()}; }

void set_settings(const Settings& s) {
  TORCH_CHECK(s.backlog >= 0, "adaptive eager: backlog must be >= 0, got ", s.backlog);
  TORCH_CHECK(s.hot_after >= 1, "adaptive eager: hot_after must be >= 1, got ", s.hot_after);
  TORCH_CHECK(s.max_ops >= 1 && s.max_ops <= 1024, "adaptive eager: max_ops must be in [1, 1024], got ", s.max_ops);
  TORCH_CHECK(s.min_bytes >= 0, "adaptive eager: min_bytes must be >= 0, got ", s.min_bytes);
  g_backlog = s.backlog;
  g_hot_after = s.hot_after;
  g_max_ops = s.max_ops;
  g_min_bytes = s.min_bytes;
}

Stats stats() {
  Stats s;
  s.ops_recorded = g_counters.ops_recorded;
  s.regions = g_counters.regions;
  s.regions_fused = g_counters.regions_fused;
  s.regions_op_by_op = g_counters.regions_op_by_op;
  s.ops_fused = g_counters.ops_fused;
  s.plan_hits = g_counters.plan_hits;
  s.plan_misses = g_counters.plan_misses;
  s.values_elided = g_counters.values_elided;
  s.flush_queue = g_counters.flushes[static_cast<int>(Reason::kQueue)];
  s.flush_shape = g_counters.flushes[static_cast<int>(Reason::kShape)];
  s.flush_full = g_counters.flushes[static_cast<int>(Reason::kFull)];
  s.flush_hazard = g_counters.flushes[static_cast<int>(Reason::kHazard)];
  s.flush_idle = g_counters.flushes[static_cast<int>(Reason::kIdle)];
  s.flush_stream = g_counters.flushes[static_cast<int>(Reason::kStream)];
  return s;
}

void reset_stats() {
  for (auto* c : {&g_counters.ops_recorded, &g_counters.regions, &g_counters.regions_fused,
                  &g_counters.regions_op_by_op, &g_counters.ops_fused, &g_counters.plan_hits, &g_counters.plan_misses,
                  &g_counters.values_elided}) {
    c->store(0);
  }
  for (auto& c : g_counters.flushes) c.store(0);
  for (int i = 0; i < runtime::kMaxDevices; ++i) {
    DeviceRegion& d = region_of(i);
    auto lock = lock_region(d);
    d.backoff = 0;
    d.skip = 0;
  }
  std::lock_guard<std::mutex> lock(g_structures_mutex);
  g_structures.clear();
}

}  // namespace torchneuron::aten::adaptive
