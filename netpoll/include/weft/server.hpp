// weft::net::Server: an accept loop with graceful drain (Go's http.Server.Shutdown, for any
// protocol).
//
//   weft::net::Server srv(std::move(listener));
//   weft::go([&] { srv.serve([](weft::net::TcpStream& s, const weft::Context& ctx) { ... }); });
//   ...                                            // SIGTERM arrives
//   absl::Status st = srv.drain(std::chrono::seconds(10));
//
// serve() runs each connection's handler in a fiber of its own, with the stream bound to the
// server's connection context (Socket::set_context) and that context passed along for the
// handler's other waits. drain(grace) stops accepting at once (the listener is closed), lets the
// handlers finish for up to `grace`, then cancels the connection context -- blocked socket calls
// fail with kCancelled, and so do the handlers' waits bounded by the context -- and waits until
// every handler has returned. Handlers must return once their context is done.
#pragma once

#include <absl/status/status.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>

#include "weft/context.hpp"
#include "weft/net.hpp"
#include "weft/runtime.hpp"
#include "weft/sync.hpp"

namespace weft::net {

class Server {
 public:
  using Handler = std::function<void(TcpStream& stream, const Context& ctx)>;

  explicit Server(TcpListener listener, const Context& parent = Context());
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // A server must be drained (or never served) before it is destroyed.
  ~Server();

  // Accepts until drain() (then returns OK) or until accepting fails for good (the error; the
  // handlers already running go on). Transient accept errors are retried, as TcpListener::accept
  // does. One serve() per Server (a second one gets kFailedPrecondition). Needs a fiber.
  // `handler_fibers` names the handler fibers and sizes their stacks (weft::FiberOptions: a
  // name from a stack-size table picks its size there); a handler fiber that cannot be started
  // ends serve() with kResourceExhausted and the reason.
  absl::Status serve(Handler handler, const FiberOptions& handler_fibers = {});
  // See the header comment. OK when every handler returned within `grace`; kDeadlineExceeded
  // ("N connections were cancelled after the grace period") when some had to be cancelled.
  // Idempotent: a second drain waits for the first one's handlers. Needs a fiber.
  absl::Status drain(std::chrono::nanoseconds grace);

  std::size_t active() const noexcept { return active_.load(std::memory_order_acquire); }
  std::string local_addr() const { return listener_.local_addr(); }
  // Done once drain() gave up waiting (the handlers' context).
  const Context& connection_context() const noexcept { return conns_ctx_; }

 private:
  TcpListener listener_;
  Context conns_ctx_;
  CancelFunc cancel_conns_;
  Context accept_ctx_;
  CancelFunc stop_accepting_;
  WaitGroup serving_;   // the serve() call in progress
  WaitGroup handlers_;  // handlers running
  std::atomic<std::size_t> active_{0};
  std::atomic<bool> served_{false};
};

}  // namespace weft::net
