// Stack overflow reports. A SIGSEGV handler, running on a per-worker sigaltstack (the faulting
// stack is unusable), checks whether the fault hit the guard page below the running fiber's
// stack. If so it names the fiber and aborts; any other fault goes to the previous handler.
#pragma once

namespace weft::detail {

class Runtime;
struct Worker;

void install_overflow_handler(Runtime& rt);  // process-wide, for the runtime's lifetime
void remove_overflow_handler();
void install_overflow_altstack(Worker& w);  // on the worker's own thread
void remove_overflow_altstack(Worker& w);

}  // namespace weft::detail
