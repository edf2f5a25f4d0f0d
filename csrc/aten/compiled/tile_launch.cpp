// Running a compiled NKI kernel (a tile program, compiler/tile_program.h) on the device queue:
// one command whose grid programs share the compute pool. Python calls it as
// torch.ops.torchneuron.launch_tile_program(entry, tensors, programs).
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "aten/compiled/compiled_launch.h"
#include "aten/device/neuron_tensor.h"
#include "compiler/tile_program.h"
#include "kernels/parallel.h"

namespace torchneuron::aten {
namespace {

// tensors: the kernel's HBM tensors in argument order (inputs, then the outputs it allocated),
// contiguous and on one neuron device; any of them may be written.
// "nki:<kernel>" for the queue's records and the profiler, kept for the life of the process
// (commands hold the pointer).
const char* interned_name(const std::string& kernel) {
  static std::mutex mutex;
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert("nki:" + kernel).first->c_str();
}

void launch_tile_program(int64_t entry, at::TensorList tensors, int64_t programs, c10::string_view name) {
  TORCH_CHECK(!tensors.empty(), "launch_tile_program: expected at least one tensor");
  TORCH_CHECK(programs >= 1, "launch_tile_program: a grid of ", programs, " programs");
  check_kernel_entry(static_cast<uintptr_t>(entry), "torchneuron::launch_tile_program");
  std::vector<char*> data;
  for (const at::Tensor& t : tensors) {
    check_same_device("torchneuron::nki_kernel", tensors[0].device(), {&t});
    TORCH_CHECK(t.is_contiguous(), "launch_tile_program: NKI kernels take contiguous tensors");
    data.push_back(static_cast<char*>(const_cast<void*>(t.const_data_ptr())));
  }
  const auto kernel = reinterpret_cast<compiler::TileProgramEntry>(static_cast<uintptr_t>(entry));
  enqueue(tensors[0], interned_name(std::string(name)), {}, [kernel, programs, data = std::move(data)] {
    std::atomic<int64_t> fault{0};
    kernels::parallel_for(programs, 1, [&](int64_t begin, int64_t end) {
      int64_t local = 0;
      kernel(data.data(), begin, end, &local);
      if (local != 0) fault.store(local);
    });
    TORCH_CHECK_INDEX(fault.load() == 0, "NKI kernel: a dynamic index read from a tile is out of range (by ",
                      fault.load(), "); it was clamped and the kernel's outputs are not valid");
  });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchneuron, m) {
  m.def("launch_tile_program(int entry, Tensor(a!)[] tensors, int programs, str name) -> ()");
}

TORCH_LIBRARY_IMPL(torchneuron, PrivateUse1, m) { m.impl("launch_tile_program", TORCH_FN(launch_tile_program)); }

}  // namespace torchneuron::aten
