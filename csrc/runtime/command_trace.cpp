#include "runtime/command_trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

namespace torchneuron::runtime::command_trace {
namespace {

std::mutex records_mutex;
std::vector<CommandRecord>& records() {
  static auto* list = new std::vector<CommandRecord>();  // never destroyed: workers may outlive statics
  return *list;
}

thread_local std::vector<uint64_t> correlation_stack;

}  // namespace

std::atomic<bool> enabled_flag{false};

void set_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(records_mutex);
  if (enabled) records().clear();
  enabled_flag.store(enabled, std::memory_order_release);
}

void push_correlation(uint64_t id) { correlation_stack.push_back(id); }

void pop_correlation() {
  if (!correlation_stack.empty()) correlation_stack.pop_back();
}

uint64_t current_correlation() { return correlation_stack.empty() ? 0 : correlation_stack.back(); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int32_t thread_id() {
  static thread_local const int32_t id = static_cast<int32_t>(::syscall(SYS_gettid));
  return id;
}

void record(const CommandRecord& record) {
  std::lock_guard<std::mutex> lock(records_mutex);
  records().push_back(record);
}

std::vector<CommandRecord> take() {
  std::lock_guard<std::mutex> lock(records_mutex);
  std::vector<CommandRecord> out;
  out.swap(records());
  return out;
}

}  // namespace torchneuron::runtime::command_trace
