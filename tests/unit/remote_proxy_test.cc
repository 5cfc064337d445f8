// The proxy thread (executor/remote_proxy.h) against a transport that records
// what it is asked to send: a slice goes out with exactly the bytes the
// consumer posted, behind its ready value; credits follow the consumer's
// releases; a lost peer is flagged; stop() sends what was written last.
// Every collective through the proxy over real UCX: ucx_mp_*_proxy, *_proxy.
#include "executor/remote_proxy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/test_util.h"

namespace collie {
namespace {

using Clock = std::chrono::steady_clock;

struct Sent {
  int peer;
  std::vector<uint8_t> data;
  uint64_t offset, flagOffset, value;
};

class RecordingTransport : public RemoteWindows {
 public:
  void put(int peer, const void* src, size_t bytes, uint64_t offset, uint64_t flagOffset, uint64_t value,
           Op*) override {
    std::lock_guard<std::mutex> lock(mu_);
    const uint8_t* p = static_cast<const uint8_t*>(src);
    sent_.push_back(Sent{peer, std::vector<uint8_t>(p, p + bytes), offset, flagOffset, value});
  }
  bool idle(const Op&) const override { return true; }
  void progress() override {}
  bool quiet() const override { return true; }
  bool failed(int peer) const override { return peer == failedPeer_.load(); }
  std::string failure(int peer) const override {
    return failed(peer) ? "rank " + std::to_string(peer) + " went away" : "";
  }
  uint8_t* allocate(size_t bytes) override {
    memory_.emplace_back(new uint8_t[bytes]());
    return memory_.back().get();
  }
  void shutdown(bool) override {}

  std::vector<Sent> sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  std::atomic<int> failedPeer_{-1};

 private:
  mutable std::mutex mu_;
  std::vector<Sent> sent_;
  std::vector<std::unique_ptr<uint8_t[]>> memory_;
};

// Waits up to 10 s for `n` recorded sends.
std::vector<Sent> awaitSends(const RecordingTransport& t, size_t n) {
  const Clock::time_point end = Clock::now() + std::chrono::seconds(10);
  while (t.sent().size() < n && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return t.sent();
}

void storeRelease(uint8_t* p, uint64_t v) { __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE); }

// Rank 1 of 3 on two channels; ranks 0 and 2 are on other hosts.
struct ProxyFixture {
  WindowLayout layout;
  RecordingTransport transport;
  std::unique_ptr<RemoteProxy> proxy;
  const int me = 1;

  ProxyFixture() {
    layout.nranks = 3;
    layout.nslots = 2;
    layout.slotBytes = 4096;
    layout.nchannels = 2;
    const Status st = RemoteProxy::create(me, layout, {true, false, true}, RemoteProxy::hostMemory(), &proxy);
    EXPECT_TRUE(st.ok()) << st.message();
    proxy->start(&transport, 10);
  }
  // Posts slice `seq` of `bytes` random bytes to remote peer q on channel c, as a consumer would.
  std::vector<uint8_t> post(int q, int c, uint64_t seq, size_t bytes, std::mt19937_64& rng) {
    std::vector<uint8_t> data(bytes);
    for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
    uint8_t* box = proxy->outbox(q);
    if (bytes > 0) memcpy(box + layout.slotOffset(c, me, seq), data.data(), bytes);  // data() may be null
    proxy->sliceBytes()[layout.connection(c, q) * layout.nslots + seq % layout.nslots] = bytes;
    storeRelease(box + layout.readyOffset(c, me), seq + 1);
    return data;
  }
};

TEST(RemoteProxy, SendsEachPostedSliceWithItsOwnByteCountThenCredits) {
  std::mt19937_64 rng(test::testSeed());
  ProxyFixture f;
  EXPECT_FALSE(f.proxy->remote(1));
  EXPECT_TRUE(f.proxy->remote(0) && f.proxy->remote(2));
  // Peer 2, channel 1: slices of 24 B (an 8 B call is not a whole slot), then 4096 B, then 0 B.
  const std::vector<uint8_t> a = f.post(2, 1, 0, 24, rng);
  const std::vector<Sent> first = awaitSends(f.transport, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].peer, 2);
  EXPECT_EQ(first[0].data, a) << "the proxy must send exactly the posted bytes";
  EXPECT_EQ(first[0].offset, f.layout.slotOffset(1, f.me, 0));
  EXPECT_EQ(first[0].flagOffset, f.layout.readyOffset(1, f.me));
  EXPECT_EQ(first[0].value, 1u);
  const std::vector<uint8_t> b = f.post(2, 1, 1, 4096, rng);
  const std::vector<uint8_t> c = f.post(2, 1, 2, 0, rng);  // slot 0 again: the peer has credited slice 0
  // Peer 0 releases two slices it sent us on channel 0: two credits, 1 then 2.
  storeRelease(f.proxy->outbox(0) + f.layout.creditOffset(0, f.me), 2);
  const std::vector<Sent> all = awaitSends(f.transport, 5);
  ASSERT_EQ(all.size(), 5u);
  std::vector<Sent> toTwo, toZero;
  for (const Sent& s : all) (s.peer == 2 ? toTwo : toZero).push_back(s);
  ASSERT_EQ(toTwo.size(), 3u);
  EXPECT_EQ(toTwo[1].data, b);
  EXPECT_EQ(toTwo[1].value, 2u);
  EXPECT_EQ(toTwo[2].data, c);
  EXPECT_EQ(toTwo[2].offset, f.layout.slotOffset(1, f.me, 2));
  EXPECT_EQ(toTwo[2].value, 3u);
  ASSERT_EQ(toZero.size(), 2u);
  for (uint64_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(toZero[i].data.empty());
    EXPECT_EQ(toZero[i].flagOffset, f.layout.creditOffset(0, f.me));
    EXPECT_EQ(toZero[i].value, i + 1);
  }
  f.proxy->stop(1);
}

TEST(RemoteProxy, ALostPeerIsFlaggedWithTheTransportsReason) {
  ProxyFixture f;
  EXPECT_EQ(f.proxy->lost()[0], 0u);
  f.transport.failedPeer_ = 0;
  const Clock::time_point end = Clock::now() + std::chrono::seconds(10);
  while (__atomic_load_n(f.proxy->lost(), __ATOMIC_ACQUIRE) == 0 && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(f.proxy->lost()[0], 1u);
  EXPECT_EQ(f.proxy->lost()[2], 0u) << "only the lost peer is flagged";
  EXPECT_EQ(f.proxy->failure(0), "rank 0 went away");
  EXPECT_EQ(f.proxy->failure(2), "");
  f.proxy->stop(1);
}

TEST(RemoteProxy, StopSendsWhatTheConsumerWroteLast) {
  std::mt19937_64 rng(test::testSeed());
  ProxyFixture f;
  // A last credit and a last slice written just before destroy: stop() must not drop them.
  const std::vector<uint8_t> last = f.post(0, 0, 0, 100, rng);
  storeRelease(f.proxy->outbox(2) + f.layout.creditOffset(1, f.me), 1);
  f.proxy->stop(5);
  const std::vector<Sent> all = f.transport.sent();
  ASSERT_EQ(all.size(), 2u);
  bool slice = false, credit = false;
  for (const Sent& s : all) {
    slice |= s.peer == 0 && s.data == last && s.value == 1;
    credit |= s.peer == 2 && s.flagOffset == f.layout.creditOffset(1, f.me) && s.value == 1;
  }
  EXPECT_TRUE(slice && credit);
}

}  // namespace
}  // namespace collie
