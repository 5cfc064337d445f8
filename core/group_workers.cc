#include "core/group_workers.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

namespace collie {
namespace group {

namespace {

// One worker: its next task, handed over under mu.
struct Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> task;
  bool has = false;
};

// The process's idle workers. Never destroyed: workers wait on it until the process ends.
struct Pool {
  explicit Pool(pid_t p) : pid(p) {}
  const pid_t pid;
  std::mutex mu;
  std::vector<Worker*> idle;
};

std::atomic<Pool*> gPool{nullptr};
std::atomic<size_t> gStarted{0};

// This process's pool: after a fork the parent's is left as it is (its workers are not in the child).
Pool* pool() {
  const pid_t me = getpid();
  Pool* p = gPool.load(std::memory_order_acquire);
  while (p == nullptr || p->pid != me) {
    Pool* made = new Pool(me);
    if (gPool.compare_exchange_strong(p, made, std::memory_order_acq_rel)) return made;
    delete made;  // another thread made it first: p is now its pool (checked again)
  }
  return p;
}

void serve(Worker* w) {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(w->mu);
      w->cv.wait(lock, [w] { return w->has; });
      task = std::move(w->task);
      w->has = false;
    }
    task();
  }
}

// Counts the tasks still running; the caller waits until none is.
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  size_t left = 0;
};

}  // namespace

Status runTogether(const std::vector<std::function<void()>>& tasks) {
  if (tasks.empty()) return Status();
  Pool* p = pool();
  std::vector<Worker*> workers;
  {
    std::lock_guard<std::mutex> lock(p->mu);
    while (workers.size() < tasks.size() && !p->idle.empty()) {
      workers.push_back(p->idle.back());
      p->idle.pop_back();
    }
  }
  // Every worker before any task: a task that started would wait for peers whose tasks never would.
  while (workers.size() < tasks.size()) {
    auto* w = new Worker();
    try {
      std::thread(serve, w).detach();
    } catch (const std::system_error& e) {
      delete w;
      std::lock_guard<std::mutex> lock(p->mu);
      p->idle.insert(p->idle.end(), workers.begin(), workers.end());
      return Status::error(collieSystemError, "collieGroupEnd: cannot start a thread for a communicator: %s", e.what());
    }
    workers.push_back(w);
    gStarted.fetch_add(1, std::memory_order_relaxed);
  }
  Latch latch;
  latch.left = tasks.size();
  for (size_t i = 0; i < tasks.size(); ++i) {
    Worker* w = workers[i];
    const std::function<void()>* task = &tasks[i];
    {
      std::lock_guard<std::mutex> lock(w->mu);
      w->task = [task, w, p, &latch] {
        (*task)();
        // Idle again before the caller learns it is done, so that its next group finds this worker.
        {
          std::lock_guard<std::mutex> idle(p->mu);
          p->idle.push_back(w);
        }
        std::lock_guard<std::mutex> done(latch.mu);
        if (--latch.left == 0) latch.cv.notify_all();
      };
      w->has = true;
    }
    w->cv.notify_one();
  }
  std::unique_lock<std::mutex> lock(latch.mu);
  latch.cv.wait(lock, [&] { return latch.left == 0; });
  return Status();
}

size_t workersStarted() { return gStarted.load(std::memory_order_relaxed); }

}  // namespace group
}  // namespace collie
