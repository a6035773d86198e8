// Server (weft/server.hpp): the accept loop bound to `accept_ctx_`, handlers bound to
// `conns_ctx_`, and drain's three steps (stop accepting, wait with a bound, cancel and wait).
//
// Order. serve() adds each handler to `handlers_` before starting its fiber, and drain() waits
// for serve() to have left its loop (`serving_`) before it waits for `handlers_`: so no handler
// can start after drain() began waiting, and drain's final wait covers every one of them.
#include "weft/server.hpp"

#include <cstdio>
#include <string>
#include <utility>

#include "weft/runtime.hpp"

namespace weft::net {

Server::Server(TcpListener listener, const Context& parent) : listener_(std::move(listener)) {
  std::tie(conns_ctx_, cancel_conns_) = with_cancel(parent);
  std::tie(accept_ctx_, stop_accepting_) = with_cancel(conns_ctx_);
  listener_.set_context(accept_ctx_);
}

Server::~Server() {
  // Nothing may still refer to the server: a serve() or handler in flight would. Stop what can be
  // stopped without waiting; drain() is the way to end a running server.
  stop_accepting_();
  cancel_conns_();
}

absl::Status Server::serve(Handler handler, const FiberOptions& handler_fibers) {
  weft::detail::require_fiber("weft::net::Server::serve");
  if (served_.exchange(true)) {
    return absl::FailedPreconditionError(
        "weft::net::Server::serve: this server is already serving (one serve() per Server)");
  }
  serving_.add(1);
  struct Leave {
    Server* s;
    ~Leave() {
      s->listener_.close();  // no new connection queues up for a server that stopped accepting
      s->serving_.done();
    }
  } leave{this};
  const std::string fiber_name(handler_fibers.name);  // the caller's view may not outlive us
  const FiberOptions fiber_opts{.name = fiber_name, .stack_size = handler_fibers.stack_size};
  for (;;) {
    absl::StatusOr<TcpStream> c = listener_.accept();
    if (!c.ok()) {
      if (!accept_ctx_.err().ok()) return absl::OkStatus();  // drain()
      return c.status();
    }
    handlers_.add(1);
    active_.fetch_add(1, std::memory_order_acq_rel);
    try {
      weft::go(fiber_opts, [this, handler, s = std::move(*c)]() mutable {
        struct Done {
          Server* srv;
          ~Done() {
            srv->active_.fetch_sub(1, std::memory_order_acq_rel);
            srv->handlers_.done();
          }
        } done{this};
        s.set_context(conns_ctx_);
        handler(s, conns_ctx_);
      });
    } catch (const std::exception& e) {
      // No handler fiber (out of memory, or a stack size no class holds): this connection is
      // closed, and serve() stops with the reason rather than dropping connections silently.
      active_.fetch_sub(1, std::memory_order_acq_rel);
      handlers_.done();
      return absl::ResourceExhaustedError(
          std::string("weft::net::Server::serve: cannot start a handler fiber: ") + e.what());
    }
  }
}

absl::Status Server::drain(std::chrono::nanoseconds grace) {
  weft::detail::require_fiber("weft::net::Server::drain");
  stop_accepting_();
  serving_.wait();  // serve() has left its loop: no handler starts from here on
  listener_.close();
  if (handlers_.wait(CancelToken::after(grace)).ok()) return absl::OkStatus();
  const std::size_t left = active();
  cancel_conns_();
  handlers_.wait();
  return absl::DeadlineExceededError("weft::net::Server::drain: " + std::to_string(left) +
                                     " connection(s) were cancelled after the grace period");
}

}  // namespace weft::net
