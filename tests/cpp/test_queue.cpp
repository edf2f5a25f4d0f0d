// Tests for the hardware queue (order, asynchrony, faults at sync, streams, launch blocking,
// cross-queue waits, concurrent submitters) and for events (query, timing, errors, block).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/command_trace.h"
#include "runtime/device.h"
#include "runtime/errors.h"
#include "runtime/event.h"
#include "runtime/hardware_queue.h"

namespace rt = torchneuron::runtime;
using namespace std::chrono_literals;

namespace {

// Holds queue commands until opened; opens itself on destruction so a failed test never hangs.
class Gate {
 public:
  ~Gate() { open(); }
  void open() {
    if (!opened_.exchange(true)) promise_.set_value();
  }
  rt::HardwareQueue::Kernel waiter() const {
    return [f = future_] { f.wait(); };
  }
  std::shared_future<void> future() const { return future_; }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
  std::atomic<bool> opened_{false};
};

rt::HardwareQueue::Kernel failing(const std::string& what) {
  return [what] { throw rt::KernelError(what); };
}

std::string fault_message(const std::function<void()>& sync) {
  try {
    sync();
  } catch (const rt::DeviceFault& e) {
    return e.what();
  }
  return "<no fault>";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const char* test_site() { return "model.py:42"; }

}  // namespace

TEST(HardwareQueue, RunsCommandsInSubmissionOrder) {
  rt::HardwareQueue q(0);
  std::vector<int> order;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(q.submit(rt::kDefaultStream, rt::LaunchInfo::named("append"), [&order, i] { order.push_back(i); }),
              uint64_t(i + 1));
  }
  EXPECT_EQ(q.last_submitted(), 1000u);
  q.synchronize();
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(q.depth(), 0u);
}

TEST(HardwareQueue, SubmitReturnsBeforeTheCommandRuns) {
  rt::HardwareQueue q(0);
  Gate gate;
  std::atomic<bool> ran{false};
  const uint64_t first = q.submit(rt::kDefaultStream, rt::LaunchInfo::named("gate"), gate.waiter());
  const uint64_t second = q.submit(rt::kDefaultStream, rt::LaunchInfo::named("flag"), [&ran] { ran = true; });
  EXPECT_FALSE(q.is_complete(first));
  EXPECT_FALSE(q.is_complete(second));
  EXPECT_FALSE(ran.load());
  EXPECT_FALSE(q.stream_idle(rt::kDefaultStream));
  gate.open();
  q.wait_for(second);
  EXPECT_TRUE(q.is_complete(first));
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(q.stream_idle(rt::kDefaultStream));
}

TEST(HardwareQueue, FaultIsRaisedAtSynchronizeWithOpInputsAndSite) {
  rt::set_launch_site_provider(&test_site);
  rt::HardwareQueue q(3);
  rt::LaunchInfo info;
  info.op = "aten::index_select";
  info.add_input({"float32", 0, 2, {4, 8}});
  info.add_input({"int64", -1, 1, {3}});
  info.add_input({"float32", 1, 8, {1, 2, 3, 4, 5, 6}});
  info.site = rt::capture_launch_site();
  const uint64_t seq = q.submit(rt::kDefaultStream, info, failing("index 9 is out of bounds"));
  rt::set_launch_site_provider(nullptr);
  EXPECT_STREQ(rt::capture_launch_site(), "");
  q.wait_for(seq);  // never raises
  EXPECT_TRUE(q.has_pending_fault());
  const std::string message = fault_message([&] { q.synchronize(); });
  EXPECT_TRUE(contains(message, "neuron:3: 'aten::index_select' failed on the device")) << message;
  EXPECT_TRUE(contains(message, "index 9 is out of bounds")) << message;
  EXPECT_TRUE(contains(message,
                       "inputs: [4, 8] float32 on neuron:0, [3] int64 on cpu, "
                       "[1, 2, 3, 4, 5, 6, ...] float32 on neuron:1"))
      << message;
  EXPECT_TRUE(contains(message, "launched at: model.py:42")) << message;
  EXPECT_FALSE(q.has_pending_fault());
  EXPECT_NO_THROW(q.synchronize());

  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("custom"), [] { throw 42; });
  const std::string unknown = fault_message([&] { q.synchronize(); });
  EXPECT_TRUE(contains(unknown, "unknown exception")) << unknown;
  EXPECT_TRUE(contains(unknown, "launched at: <not from Python>")) << unknown;
}

TEST(HardwareQueue, EarliestFaultWinsLaterCommandsAreSkippedAndTheDeviceRecovers) {
  rt::HardwareQueue q(0);
  std::atomic<int> ran{0};
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("op_first"), failing("first failure"));
  q.submit(7, rt::LaunchInfo::named("after"), [&ran] { ran += 1; });
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("op_second"), failing("second failure"));
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("after"), [&ran] { ran += 1; });
  const std::string message = fault_message([&] { q.synchronize(); });
  EXPECT_TRUE(contains(message, "op_first")) << message;
  EXPECT_TRUE(contains(message, "first failure")) << message;
  EXPECT_FALSE(contains(message, "second")) << message;
  EXPECT_EQ(ran.load(), 0);
  EXPECT_NO_THROW(q.synchronize());  // the second fault was skipped, never recorded
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("after"), [&ran] { ran += 1; });
  EXPECT_NO_THROW(q.synchronize());
  EXPECT_EQ(ran.load(), 1);
}

// Work queued after a fault and before its raise is skipped, whichever sync point raises it.
TEST(HardwareQueue, RaisingAtAStreamSyncStillSkipsWorkQueuedBeforeTheRaise) {
  rt::HardwareQueue q(0);
  Gate gate, hold;
  std::atomic<int> ran{0};
  // The worker releases a command's captures before moving on; this one's release blocks it
  // until `hold` opens, right after it passed the faulty command.
  const auto wait_then_delete = [f = hold.future()](int* p) {
    f.wait();
    delete p;
  };
  auto held = std::shared_ptr<int>(new int(0), wait_then_delete);
  q.submit(3, rt::LaunchInfo::named("gate"), gate.waiter());
  q.submit(1, rt::LaunchInfo::named("faulty"), failing("boom"));
  q.submit(2, rt::LaunchInfo::named("held"), [&ran, held] { ran += 1; });
  held.reset();
  for (int i = 0; i < 10; ++i) q.submit(2, rt::LaunchInfo::named("later"), [&ran] { ran += 1; });
  gate.open();
  auto raised = std::async(std::launch::async,
                           [&q] { return fault_message([&q] { q.synchronize_stream(1); }); });
  raised.wait_for(1s);  // returns at once unless the raise first drains the queue
  hold.open();
  EXPECT_TRUE(contains(raised.get(), "'faulty' failed"));
  q.synchronize();
  EXPECT_EQ(ran.load(), 0) << "commands queued after the fault and before its raise ran";
}

TEST(HardwareQueue, SynchronizeStreamWaitsOnlyForThatStream) {
  rt::HardwareQueue q(0);
  Gate gate;
  std::atomic<bool> ran{false};
  q.submit(1, rt::LaunchInfo::named("flag"), [&ran] { ran = true; });
  q.submit(2, rt::LaunchInfo::named("gate"), gate.waiter());
  auto sync = std::async(std::launch::async, [&q] { q.synchronize_stream(1); });
  const bool returned = sync.wait_for(5s) == std::future_status::ready;
  EXPECT_TRUE(returned) << "synchronize_stream(1) waited for stream 2";
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(q.stream_idle(1));
  EXPECT_FALSE(q.stream_idle(2));
  EXPECT_TRUE(q.stream_idle(99));  // a stream with no work
  gate.open();
  sync.get();
  q.synchronize_stream(2);
  EXPECT_TRUE(q.stream_idle(2));
}

TEST(HardwareQueue, LaunchBlockingWaitsAndRaisesAtSubmit) {
  rt::HardwareQueue q(0);
  rt::set_launch_blocking(true);
  EXPECT_TRUE(rt::launch_blocking());
  const uint64_t seq = q.submit(rt::kDefaultStream, rt::LaunchInfo::named("noop"), [] {});
  EXPECT_TRUE(q.is_complete(seq));
  EXPECT_THROW(q.submit(rt::kDefaultStream, rt::LaunchInfo::named("faulty"), failing("bad")), rt::DeviceFault);
  rt::set_launch_blocking(false);
  EXPECT_FALSE(q.has_pending_fault());
  EXPECT_NO_THROW(q.synchronize());
}

TEST(HardwareQueue, SubmitWaitHoldsOneQueueUntilTheOtherCompletes) {
  rt::HardwareQueue q0(0);
  rt::HardwareQueue q1(1);
  Gate gate;
  std::atomic<bool> ran{false};
  const uint64_t gated = q0.submit(rt::kDefaultStream, rt::LaunchInfo::named("gate"), gate.waiter());
  q1.submit_wait(rt::kDefaultStream, q0, gated);
  const uint64_t flag = q1.submit(rt::kDefaultStream, rt::LaunchInfo::named("flag"), [&ran] { ran = true; });
  EXPECT_FALSE(q1.is_complete(flag));
  EXPECT_FALSE(ran.load());
  gate.open();
  q1.synchronize();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(q0.is_complete(gated));
  EXPECT_EQ(q0.submit_wait(rt::kDefaultStream, q0, gated), q0.last_submitted());  // no-op
}

TEST(HardwareQueue, BoundedDepthBlocksSubmittersWithoutLosingCommands) {
  rt::HardwareQueue q(0, 2);
  Gate gate;
  std::vector<int> order;
  size_t max_depth = 0;
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("gate"), gate.waiter());
  std::thread producer([&] {
    for (int i = 0; i < 50; ++i) {
      q.submit(rt::kDefaultStream, rt::LaunchInfo::named("append"), [&, i] {
        order.push_back(i);
        max_depth = std::max(max_depth, q.depth());
      });
    }
  });
  gate.open();
  producer.join();
  q.synchronize();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  EXPECT_LE(max_depth, 2u);
}

TEST(HardwareQueue, ManyThreadsSubmitToManyStreamsConcurrently) {
  constexpr int kThreads = 8;
  constexpr int kCommands = 300;
  rt::HardwareQueue queues[2] = {rt::HardwareQueue(0), rt::HardwareQueue(1)};
  std::vector<std::vector<int>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      rt::HardwareQueue& q = queues[t % 2];
      const rt::StreamId stream = t + 1;
      uint64_t previous = 0;
      for (int i = 0; i < kCommands; ++i) {
        const uint64_t seq =
            q.submit(stream, rt::LaunchInfo::named("append"), [&seen, t, i] { seen[t].push_back(i); });
        EXPECT_GT(seq, previous);
        previous = seq;
        EXPECT_EQ(q.last_submitted(stream), seq);
      }
      q.synchronize_stream(stream);
      EXPECT_TRUE(q.stream_idle(stream));
      EXPECT_EQ(seen[t].size(), size_t(kCommands));  // this thread's stream has drained
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& q : queues) q.synchronize();
  EXPECT_EQ(queues[0].last_submitted(), uint64_t(kThreads / 2 * kCommands));
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), size_t(kCommands));
    for (int i = 0; i < kCommands; ++i) EXPECT_EQ(seen[t][i], i);
  }
}

TEST(HardwareQueue, DestructionRunsEveryQueuedCommand) {
  auto count = std::make_shared<std::atomic<int>>(0);
  {
    rt::HardwareQueue q(0);
    for (int i = 0; i < 100; ++i) {
      q.submit(rt::kDefaultStream, rt::LaunchInfo::named("count"), [count] { *count += 1; });
    }
  }
  EXPECT_EQ(count->load(), 100);
  EXPECT_EQ(count.use_count(), 1);  // captured state was released
}

TEST(Event, QueryIsFalseUntilTheMarkerRuns) {
  rt::Device& d = rt::device(0);
  const rt::StreamId stream = d.new_stream();
  rt::Event unrecorded(false);
  EXPECT_TRUE(unrecorded.query());  // as in CUDA
  EXPECT_NO_THROW(unrecorded.synchronize());
  Gate gate;
  d.queue().submit(stream, rt::LaunchInfo::named("gate"), gate.waiter());
  rt::Event event(false);
  event.record(0, stream);
  EXPECT_TRUE(event.is_recorded());
  EXPECT_EQ(event.device_index(), 0);
  EXPECT_FALSE(event.query());
  gate.open();
  event.synchronize();
  EXPECT_TRUE(event.query());
}

TEST(Event, ElapsedTimeCoversTheWorkBetweenTwoMarkers) {
  rt::Device& d = rt::device(0);
  const rt::StreamId stream = d.new_stream();
  rt::Event start(true), end(true);
  start.record(0, stream);
  d.queue().submit(stream, rt::LaunchInfo::named("busy"), [] {
    const auto until = std::chrono::steady_clock::now() + 2ms;
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  end.record(0, stream);
  const double ms = start.elapsed_ms(end);
  EXPECT_GE(ms, 2.0);
  EXPECT_LT(ms, 5000.0);
  EXPECT_GE(end.elapsed_ms(end), 0.0);
}

TEST(Event, ElapsedTimeErrors) {
  rt::Device& d = rt::device(0);
  rt::Event untimed(false), timed(true), unrecorded(true);
  untimed.record(0, rt::kDefaultStream);
  timed.record(0, rt::kDefaultStream);
  EXPECT_THROW(untimed.elapsed_ms(timed), rt::InvalidArgument);
  EXPECT_THROW(timed.elapsed_ms(untimed), rt::InvalidArgument);
  EXPECT_THROW(timed.elapsed_ms(unrecorded), rt::InvalidArgument);

  d.queue().submit(rt::kDefaultStream, rt::LaunchInfo::named("faulty"), failing("bad"));
  rt::Event skipped(true);
  skipped.record(0, rt::kDefaultStream);
  EXPECT_THROW(skipped.synchronize(), rt::DeviceFault);  // the marker came after the fault
  EXPECT_THROW(timed.elapsed_ms(skipped), rt::InvalidArgument);
  EXPECT_NO_THROW(d.synchronize());
}

TEST(Event, BlockMakesAnotherDeviceWaitForTheMarker) {
  if (rt::device_count() < 2) GTEST_SKIP() << "needs two devices";
  rt::Device& d0 = rt::device(0);
  rt::Device& d1 = rt::device(1);
  Gate gate;
  std::atomic<bool> ran{false};
  d0.queue().submit(rt::kDefaultStream, rt::LaunchInfo::named("gate"), gate.waiter());
  rt::Event event(false);
  event.record(0, rt::kDefaultStream);
  event.block(1, rt::kDefaultStream);
  const uint64_t flag =
      d1.queue().submit(rt::kDefaultStream, rt::LaunchInfo::named("flag"), [&ran] { ran = true; });
  EXPECT_FALSE(d1.queue().is_complete(flag));
  EXPECT_FALSE(ran.load());
  gate.open();
  d1.synchronize();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(event.query());
  d0.synchronize();
}

namespace {

// Counts live copies of itself, to check that a kernel's captures are released exactly once.
struct Tracked {
  explicit Tracked(std::shared_ptr<int> counter) : counter(std::move(counter)) { ++*this->counter; }
  Tracked(const Tracked& other) : counter(other.counter) { ++*counter; }
  Tracked(Tracked&& other) noexcept : counter(other.counter) { ++*counter; }
  ~Tracked() { --*counter; }
  std::shared_ptr<int> counter;
};

}  // namespace

TEST(KernelFunction, SmallAndLargeCallablesRunMoveAndReleaseTheirCaptures) {
  auto live = std::make_shared<int>(0);
  int calls = 0;
  {
    rt::KernelFunction small([t = Tracked(live), &calls] { ++calls; });
    std::array<char, rt::KernelFunction::kInlineBytes + 1> big{};
    big[0] = 7;
    rt::KernelFunction large([t = Tracked(live), big, &calls] { calls += big[0]; });  // on the heap
    EXPECT_EQ(*live, 2);
    rt::KernelFunction moved(std::move(small));
    EXPECT_FALSE(static_cast<bool>(small));
    EXPECT_EQ(*live, 2);
    moved();
    large();
    EXPECT_EQ(calls, 8);
    large = std::move(moved);  // releases the large callable's captures
    EXPECT_EQ(*live, 1);
    large();
    EXPECT_EQ(calls, 9);
    large = nullptr;
    EXPECT_EQ(*live, 0);
  }
  EXPECT_EQ(*live, 0);
}

TEST(HardwareQueue, FullQueueResumesAfterDrainingToHalfWithoutLosingCommands) {
  rt::HardwareQueue q(0, 8);
  Gate gate;
  std::atomic<int> ran{0};
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("gate"), gate.waiter());
  for (int i = 0; i < 7; ++i) q.submit(rt::kDefaultStream, rt::LaunchInfo::named("count"), [&] { ++ran; });
  std::atomic<bool> submitted{false};
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) q.submit(rt::kDefaultStream, rt::LaunchInfo::named("count"), [&] { ++ran; });
    submitted = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(submitted.load());  // blocked: the gate holds the queue full
  gate.open();
  producer.join();
  q.synchronize();
  EXPECT_EQ(ran.load(), 107);
}

TEST(HardwareQueue, WaitersForDifferentCommandsEachReturnOnceTheirCommandIsDone) {
  rt::HardwareQueue q(0);
  Gate first_gate, second_gate;
  const uint64_t first = q.submit(rt::kDefaultStream, rt::LaunchInfo::named("gate"), first_gate.waiter());
  const uint64_t second = q.submit(rt::kDefaultStream, rt::LaunchInfo::named("gate"), second_gate.waiter());
  std::atomic<int> returned{0};
  std::thread late([&] { q.wait_for(second); returned += 10; });
  std::thread early([&] { q.wait_for(first); returned += 1; });
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(returned.load(), 0);
  first_gate.open();
  early.join();
  EXPECT_EQ(returned.load(), 1);  // the later waiter is still asleep
  second_gate.open();
  late.join();
  EXPECT_EQ(returned.load(), 11);
}

TEST(HardwareQueue, DepthExceedsCountsPendingCommands) {
  rt::HardwareQueue q(0);
  Gate gate;
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("gate"), gate.waiter());
  for (int i = 0; i < 5; ++i) q.submit(rt::kDefaultStream, rt::LaunchInfo::named("noop"), [] {});
  EXPECT_TRUE(q.depth_exceeds(3));
  EXPECT_FALSE(q.depth_exceeds(6));
  gate.open();
  q.synchronize();
  EXPECT_FALSE(q.depth_exceeds(0));
  EXPECT_EQ(q.depth(), 0u);
}

TEST(HardwareQueue, DeferredWorkIsFlushedBeforeSubmitsSyncsAndQueries) {
  static std::atomic<int> flushes{0};
  rt::set_deferred_work_flusher([](int) { flushes++; });
  rt::HardwareQueue q(0);
  flushes = 0;
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("noop"), [] {});
  EXPECT_EQ(flushes.load(), 0);  // nothing deferred: the flusher is not called
  q.set_has_deferred_work(true);  // this flusher leaves it set, so every call below flushes
  flushes = 0;
  q.submit(rt::kDefaultStream, rt::LaunchInfo::named("noop"), [] {});
  EXPECT_GE(flushes.load(), 1);
  flushes = 0;
  q.synchronize();
  EXPECT_GE(flushes.load(), 1);
  flushes = 0;
  EXPECT_TRUE(q.stream_idle(rt::kDefaultStream));
  EXPECT_GE(flushes.load(), 1);
  q.set_has_deferred_work(false);
  rt::set_deferred_work_flusher(nullptr);
}

TEST(CommandTrace, HoldsAtMostItsCapacityAndCountsTheRest) {
  namespace trace = rt::command_trace;
  const size_t before = trace::capacity();
  trace::set_capacity(5);
  trace::set_enabled(true);
  for (int i = 0; i < 12; ++i) {
    rt::CommandRecord record;
    record.seq = static_cast<uint64_t>(i);
    trace::record(record);
  }
  trace::set_enabled(false);
  const std::vector<rt::CommandRecord> kept = trace::take();
  ASSERT_EQ(kept.size(), 5u);
  EXPECT_EQ(kept.back().seq, 4u);  // the first ones are kept
  EXPECT_EQ(trace::dropped(), 7u);
  trace::set_enabled(true);  // a new recording starts with none dropped
  EXPECT_EQ(trace::dropped(), 0u);
  trace::set_enabled(false);
  trace::set_capacity(before);
}

TEST(Event, IsLiveOnlyWhileTheEventExists) {
  auto event = std::make_unique<rt::Event>(false);
  const void* handle = event.get();
  EXPECT_TRUE(rt::Event::is_live(handle));
  EXPECT_FALSE(rt::Event::is_live(nullptr));
  EXPECT_FALSE(rt::Event::is_live(&handle));  // some other object's address
  event.reset();
  EXPECT_FALSE(rt::Event::is_live(handle));
}
