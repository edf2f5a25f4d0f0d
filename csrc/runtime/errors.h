// Error types the runtime throws. The aten layer maps them onto torch's Python exceptions
// (OutOfMemoryError -> torch.OutOfMemoryError, DeviceFault -> torch.AcceleratorError, ...).
#pragma once

#include <stdexcept>
#include <string>

namespace torchneuron::runtime {

// Base of every error the runtime raises on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad arguments detected on the host before anything was enqueued.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// An allocation that does not fit in the device's HBM, even after freeing cached blocks.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// A command failed on the hardware queue; raised at the next synchronization point.
class DeviceFault : public Error {
 public:
  using Error::Error;
};

// The process forked after the parent had started the device's queues.
class ForkedProcessError : public Error {
 public:
  using Error::Error;
};

// Thrown by a kernel running on the queue to report a data-dependent failure
// (an index out of range, an injected fault). The queue turns it into a DeviceFault.
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace torchneuron::runtime
