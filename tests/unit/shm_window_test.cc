// Shared-memory windows: every rank sees every other's window, writes land in
// the peer's mapping (one mapping per process), and no segment name is left in /dev/shm after init.
#include "transport/shm/shm_window.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "transport/bootstrap/bootstrap.h"

namespace {

TEST(ShmWindows, MappedByAllAndUnlinked) {
  const int n = 4;
  const size_t bytes = 1 << 16;
  collie::Secret secret;
  ASSERT_TRUE(collie::randomSecret(&secret).ok());
  collieUniqueId id;
  ASSERT_TRUE(collie::startRendezvousRoot("127.0.0.1", 0, secret, 10, &id).ok());
  std::vector<std::unique_ptr<collie::Bootstrap>> bs(n);
  std::vector<std::unique_ptr<collie::ShmWindows>> win(n);
  std::vector<collie::Status> st(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      int info = r;
      st[r] = collie::Bootstrap::create(id, r, n, &info, sizeof(info), 10, &bs[r]);
      if (st[r].ok()) st[r] = collie::ShmWindows::create(bs[r].get(), bytes, &win[r]);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[r].ok()) << st[r].message();
  // Unlinked once everyone mapped them. (Checked by name: other tests running
  // at the same time have segments of their own in /dev/shm.)
  for (int r = 0; r < n; ++r) {
    const std::string path = "/dev/shm" + win[0]->name(r);
    EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " still exists";
  }
  // Ranks of one process share one mapping of each window: a flag lies at one address for all of them, so
  // ThreadSanitizer sees the order it carries between them (ShmSegment).
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) EXPECT_EQ(win[r]->window(p), win[p]->window(p)) << "rank " << r << "'s view of " << p;
  // Rank r writes into each peer's window at offset 8*r; each owner reads it from its own mapping.
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) {
      uint64_t v = 1000 * r + p;
      memcpy(win[r]->window(p) + 8 * r, &v, 8);
    }
  for (int p = 0; p < n; ++p)
    for (int r = 0; r < n; ++r) {
      uint64_t v;
      memcpy(&v, win[p]->window(p) + 8 * r, 8);
      EXPECT_EQ(v, static_cast<uint64_t>(1000 * r + p));
    }
}

TEST(ShmSegment, CreateFailsOnExistingName) {
  collie::ShmSegment a, b;
  const std::string name = "/collie-test-" + std::to_string(getpid());
  ASSERT_TRUE(collie::ShmSegment::create(name, 4096, &a).ok());
  EXPECT_FALSE(collie::ShmSegment::create(name, 4096, &b).ok());
  collie::ShmSegment c;
  EXPECT_FALSE(collie::ShmSegment::open(name, 8192, &c).ok());  // wrong size is refused
  ASSERT_TRUE(collie::ShmSegment::open(name, 4096, &c).ok());
  EXPECT_TRUE(a.unlink().ok());
  EXPECT_FALSE(collie::ShmSegment::open(name, 4096, &c).ok());
}

}  // namespace
