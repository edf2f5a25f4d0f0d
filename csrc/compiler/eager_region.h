// Adaptive eager's fusion region, torch-free: pointwise ops recorded over one element count,
// checked for memory hazards as they arrive, keyed by their structure, and run as one command
// that applies every op's own eager kernel block by block, so results are bitwise eager's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "runtime/hardware_queue.h"

namespace torchneuron::compiler {

// An op's eager kernel over its operand layout (operand 0 is the output).
using ElementwiseKernel = std::function<void(const kernels::ElementwiseArgs&)>;

// One memory range the region's operands touch, matched exactly: same start, element stride
// and dtype. Overlapping ranges that are not exact matches are hazards (see EagerRegion::add).
struct RegionAccess {
  char* data = nullptr;
  int64_t stride = 0;  // bytes; 0 for a broadcast element
  kernels::DType dtype = kernels::DType::kFloat32;
  int64_t bytes = 0;
  bool written = false;
  bool written_first = false;  // the region makes it: its first access is a write
};

struct RecordedOp {
  ElementwiseKernel kernel;
  kernels::ElementwiseArgs args;  // 1-D over the region's elements
  runtime::LaunchInfo info;
  std::array<int, kernels::kMaxOperands> access{-1, -1, -1, -1};  // -1: a host scalar
};

// How a region runs fused: which accesses live in per-block scratch instead of memory.
struct RegionPlan {
  int64_t block = 0;                 // elements per block
  std::vector<int64_t> scratch_offset;  // per access: byte offset in the scratch, or -1
  int64_t scratch_bytes = 0;
  int elided = 0;                    // accesses never written to memory
};

class EagerRegion {
 public:
  enum class AddResult { kAdded, kHazard, kOtherShape, kUnsupported };
  // Records an op whose args are 1-D (or 0-D) with dense or broadcast (stride 0) operands,
  // taking `kernel` only then. kHazard: it touches memory the region uses in a way block-wise
  // order would break (a shifted view, a reinterpretation); kOtherShape: its element count is
  // not the region's; either way the region must run first. kUnsupported: the op cannot be
  // split into blocks (more dims, or its own operands overlap other than element for element).
  AddResult add(ElementwiseKernel& kernel, const kernels::ElementwiseArgs& args, const runtime::LaunchInfo& info);

  bool empty() const { return ops_.empty(); }
  int size() const { return static_cast<int>(ops_.size()); }
  int64_t numel() const { return numel_; }
  // Bytes of the values the region made: memory eager mode could have reused by now.
  int64_t made_bytes() const { return made_bytes_; }
  const std::vector<RegionAccess>& accesses() const { return accesses_; }
  const std::vector<RecordedOp>& ops() const { return ops_; }

  // The structure a plan depends on: ops, dtypes, operand kinds, dataflow, and which
  // accesses are `dead` (made here and held by nobody once the region has run).
  std::string structure_key(const std::vector<bool>& dead) const;
  RegionPlan plan(const std::vector<bool>& dead) const;

  // Takes the recorded ops, leaving the region empty.
  std::vector<RecordedOp> take_ops();
  void clear();

 private:
  // The access of one operand, or -1 on a hazard.
  int access_of(char* data, int64_t stride, kernels::DType dtype, int64_t bytes, bool write);
  std::vector<RecordedOp> ops_;
  std::vector<RegionAccess> accesses_;
  int64_t numel_ = -1;
  int64_t made_bytes_ = 0;
};

// Runs `ops` over `numel` elements as planned, one block at a time (blocks spread over the
// compute engines). A kernel's failure is rethrown naming the op and its launching line.
void run_region(const std::vector<RecordedOp>& ops, const RegionPlan& plan, int64_t numel);

}  // namespace torchneuron::compiler
