// Go by Example: Non-Blocking Channel Operations --
// https://gobyexample.com/non-blocking-channel-operations
//
// A select with a case_default never blocks, as in Go. (For a single channel, try_recv() and
// try_send() say the same thing more briefly.)
#include <cstdio>
#include <optional>
#include <string>
#include <weft/weft.hpp>

int main() {
  weft::run([] {
    weft::Chan<std::string> messages;
    weft::Chan<bool> signals;

    // A non-blocking receive: if a value is available on messages, select takes that case;
    // otherwise it immediately takes the default case.
    weft::select(weft::case_recv(messages,
                                 [](std::optional<std::string> msg) {
                                   std::printf("received message %s\n", msg.value().c_str());
                                 }),
                 weft::case_default([] { std::printf("no message received\n"); }));

    // A non-blocking send works the same way. Here msg cannot be sent to messages: the channel
    // has no buffer and there is no receiver, so the default case is selected.
    std::string msg = "hi";
    weft::select(
        weft::case_send(messages, msg, [&] { std::printf("sent message %s\n", msg.c_str()); }),
        weft::case_default([] { std::printf("no message sent\n"); }));

    // Several cases above the default clause implement a multi-way non-blocking select.
    weft::select(weft::case_recv(messages,
                                 [](std::optional<std::string> msg) {
                                   std::printf("received message %s\n", msg.value().c_str());
                                 }),
                 weft::case_recv(signals,
                                 [](std::optional<bool> sig) {
                                   std::printf("received signal %s\n",
                                               sig.value() ? "true" : "false");
                                 }),
                 weft::case_default([] { std::printf("no activity\n"); }));
  });
}
