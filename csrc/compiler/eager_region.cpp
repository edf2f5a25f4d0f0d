// Recording, hazard checks, planning and block-wise running of a fusion region.
#include "compiler/eager_region.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "kernels/parallel.h"

namespace torchneuron::compiler {
namespace {

// Blocks of this many elements keep every scratch value of a long chain in a core's L2
// (64 float64 values: 2 MiB at most, a few values in practice), and are a multiple of every
// vector width. A compute engine takes at least kBlocksPerTask blocks, as an eager kernel
// takes 32768 elements: smaller regions run on the queue's thread with no hand-off.
constexpr int64_t kBlockElements = 4096;
constexpr int64_t kBlocksPerTask = 8;

bool overlaps(const RegionAccess& a, const char* data, int64_t bytes) {
  return a.data < data + bytes && data < a.data + a.bytes;
}

struct OperandRange {
  char* data;
  int64_t stride;
  kernels::DType dtype;
  int64_t bytes;
  bool write;
};

}  // namespace

int EagerRegion::access_of(char* data, int64_t stride, kernels::DType dtype, int64_t bytes, bool write) {
  int exact = -1;
  for (int i = 0; i < static_cast<int>(accesses_.size()); ++i) {
    const RegionAccess& a = accesses_[i];
    if (!overlaps(a, data, bytes)) continue;
    if (a.data == data && a.stride == stride && a.dtype == dtype && a.bytes == bytes) {
      exact = i;
    } else if (a.written || write) {
      return -1;
    }
  }
  return exact >= 0 ? exact : -2;  // -2: a new access
}

EagerRegion::AddResult EagerRegion::add(ElementwiseKernel& kernel, const kernels::ElementwiseArgs& args,
                                        const runtime::LaunchInfo& info) {
  const int64_t numel = args.numel();
  if (args.ndim > 1) return AddResult::kUnsupported;
  if (numel_ >= 0 && numel != numel_) return AddResult::kOtherShape;
  // Fixed-size: this runs for every recorded op, and the host is what a small op costs.
  std::array<OperandRange, kernels::kMaxOperands> ranges{};
  std::array<int, kernels::kMaxOperands> operand_of_range{};
  size_t num_ranges = 0;
  for (int k = 0; k < args.num_operands; ++k) {
    if (args.is_scalar[k]) continue;
    const int64_t size = static_cast<int64_t>(kernels::element_size(args.dtypes[k]));
    const int64_t stride = args.ndim == 0 ? size : args.strides[k][0];
    if (stride != 0 && stride != size) return AddResult::kUnsupported;
    if (k == 0 && stride == 0) return AddResult::kUnsupported;
    operand_of_range[num_ranges] = k;
    ranges[num_ranges++] = {args.data[k], stride, args.dtypes[k], stride == 0 ? size : size * numel, k == 0};
  }
  // The op's own operands: reading its output's memory other than element for element.
  for (size_t i = 1; i < num_ranges; ++i) {
    const OperandRange& out = ranges[0];
    const OperandRange& in = ranges[i];
    const bool overlap = in.data < out.data + out.bytes && out.data < in.data + in.bytes;
    if (overlap && !(in.data == out.data && in.stride == out.stride && in.dtype == out.dtype)) {
      return AddResult::kUnsupported;
    }
  }
  // Check every operand before recording any.
  std::array<int, kernels::kMaxOperands> found{};
  for (size_t i = 0; i < num_ranges; ++i) {
    const OperandRange& r = ranges[i];
    found[i] = access_of(r.data, r.stride, r.dtype, r.bytes, r.write);
    if (found[i] == -1) return AddResult::kHazard;
  }
  RecordedOp op{std::move(kernel), args, info, {-1, -1, -1, -1}};
  op.args.ndim = 1;
  op.args.sizes[0] = numel;
  // Inputs before the output: an in-place op reads its range before it writes it.
  for (size_t pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < num_ranges; ++i) {
      if ((i == 0) != (pass == 1)) continue;  // ranges[0] is the output
      const OperandRange& r = ranges[i];
      int a = found[i];
      if (a == -2) {
        const auto same = std::find_if(accesses_.begin(), accesses_.end(), [&](const RegionAccess& x) {
          return x.data == r.data && x.stride == r.stride && x.dtype == r.dtype;
        });
        if (same != accesses_.end()) {
          a = static_cast<int>(same - accesses_.begin());
        } else {
          accesses_.push_back({r.data, r.stride, r.dtype, r.bytes, false, r.write});
          a = static_cast<int>(accesses_.size()) - 1;
          if (r.write) made_bytes_ += r.bytes;
        }
      }
      if (r.write) accesses_[a].written = true;
      const int k = operand_of_range[i];
      op.args.strides[k][0] = r.stride;
      op.access[k] = a;
    }
  }
  numel_ = numel;
  ops_.push_back(std::move(op));
  return AddResult::kAdded;
}

std::string EagerRegion::structure_key(const std::vector<bool>& dead) const {
  std::string key;
  key.reserve(ops_.size() * 24 + dead.size());
  auto put = [&key](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  for (const RecordedOp& op : ops_) {
    put(&op.info.op, sizeof(op.info.op));  // interned names: the pointer identifies the op
    const int8_t n = static_cast<int8_t>(op.args.num_operands);
    put(&n, 1);
    for (int k = 0; k < n; ++k) {
      const int16_t a = static_cast<int16_t>(op.access[k]);
      const bool broadcast = a >= 0 && accesses_[a].stride == 0;
      put(&a, sizeof(a));
      put(&op.args.dtypes[k], sizeof(op.args.dtypes[k]));
      key.push_back(static_cast<char>(op.args.is_scalar[k] | (broadcast << 1)));
    }
  }
  for (bool d : dead) key.push_back(d ? 'd' : 'l');
  return key;
}

RegionPlan EagerRegion::plan(const std::vector<bool>& dead) const {
  RegionPlan plan;
  plan.block = kBlockElements;
  plan.scratch_offset.assign(accesses_.size(), -1);
  std::vector<bool> scratch(accesses_.size(), false);
  std::vector<int> last_use(accesses_.size(), -1);
  for (size_t i = 0; i < accesses_.size(); ++i) {
    const RegionAccess& a = accesses_[i];
    scratch[i] = dead[i] && a.written_first && a.stride != 0;
    plan.elided += scratch[i];
  }
  for (int op = 0; op < static_cast<int>(ops_.size()); ++op) {
    for (int a : ops_[op].access) {
      if (a >= 0) last_use[a] = op;
    }
  }
  // Scratch rows are shared by values whose lifetimes do not overlap, as the compiler's memory
  // planner shares buffers: a chain's few live values stay in the core's nearest cache.
  struct Row {
    int64_t offset, bytes;
    int free_after;  // the op after which the row is free again
  };
  std::vector<Row> rows;
  for (int op = 0; op < static_cast<int>(ops_.size()); ++op) {
    const int a = ops_[op].access[0];
    if (a < 0 || !scratch[a] || plan.scratch_offset[a] >= 0) continue;
    const int64_t bytes = (accesses_[a].stride * plan.block + 63) / 64 * 64;  // 64-byte aligned rows
    auto row = std::find_if(rows.begin(), rows.end(),
                            [&](const Row& r) { return r.free_after < op && r.bytes == bytes; });
    if (row == rows.end()) {
      rows.push_back({plan.scratch_bytes, bytes, -1});
      plan.scratch_bytes += bytes;
      row = rows.end() - 1;
    }
    row->free_after = last_use[a];
    plan.scratch_offset[a] = row->offset;
  }
  return plan;
}

std::vector<RecordedOp> EagerRegion::take_ops() {
  std::vector<RecordedOp> ops;
  ops.swap(ops_);
  clear();
  return ops;
}

void EagerRegion::clear() {
  ops_.clear();
  accesses_.clear();
  numel_ = -1;
  made_bytes_ = 0;
}

void run_region(const std::vector<RecordedOp>& ops, const RegionPlan& plan, int64_t numel) {
  const int64_t blocks = (numel + plan.block - 1) / plan.block;
  kernels::parallel_for(blocks, kBlocksPerTask, [&](int64_t first, int64_t last) {
    thread_local std::vector<char> scratch_memory;
    if (static_cast<int64_t>(scratch_memory.size()) < plan.scratch_bytes + 64) {
      scratch_memory.resize(plan.scratch_bytes + 64);
    }
    char* scratch = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(scratch_memory.data()) + 63) / 64 * 64);
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * plan.block;
      const int64_t count = std::min(plan.block, numel - begin);
      for (const RecordedOp& op : ops) {
        kernels::ElementwiseArgs args = op.args;
        args.sizes[0] = count;
        for (int k = 0; k < args.num_operands; ++k) {
          const int a = op.access[k];
          if (a < 0) continue;
          if (plan.scratch_offset[a] >= 0) {
            args.data[k] = scratch + plan.scratch_offset[a];
          } else {
            args.data[k] += begin * args.strides[k][0];
          }
        }
        try {
          op.kernel(args);
        } catch (const std::exception& e) {
          throw std::runtime_error(std::string(op.info.op) + " (launched at " +
                                   (*op.info.site != '\0' ? op.info.site : "<not from Python>") +
                                   ", fused by adaptive eager) failed: " + e.what());
        }
      }
    }
  });
}

}  // namespace torchneuron::compiler
