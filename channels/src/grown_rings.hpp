// Grown rings: a channel whose ring grew to kListedRingBytes or more is listed here, and the
// heap return (a memory returner on the monitor thread, weft/detail/memory_return.hpp) frees
// the rings of the listed channels it finds empty. The next send grows a ring again from the
// first size.
//
// Why: a ring grows on demand but never shrinks on the data path (chan_core.hpp: that would put
// allocation there). A burst leaves the rings of the channels that queued it at full size --
// 80 KB for a chat server's hub channel after 10,000 clients joined at once -- resident for as
// long as the channel lives. Once a burst is over, the heap return gives those back; a channel
// that is busy at that moment is skipped (its lock is only tried) and keeps its ring.
//
// Locks: the list's mutex, then a channel's lock is the returner's order, but it only tries the
// channel's, so growing (channel lock held, then the list's mutex) cannot deadlock with it. The
// list and the nodes' links are guarded by the mutex. ChanCore::ring_listed is written under it:
// true when the channel is listed; false by the returner as its very last touch of a channel it
// unlisted, after unlocking it. The last handle's release reads it without the mutex: false means
// no returner can still be touching the channel, so it may be freed; true sends it to the mutex
// to unlink the channel.
#pragma once

#include <cstddef>

#include "chan_core.hpp"

namespace weft::detail {

inline constexpr std::size_t kListedRingBytes = 4096;

// grow_ring_locked's last step: lists the channel if its ring reached kListedRingBytes.
void list_grown_ring_locked(ChanCore* c) noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->lock);
// chan_release's first step: the last handle is gone; takes the channel off the list.
void unlist_grown_ring(ChanCore* c) noexcept;
// The memory returner: frees the rings of listed channels that are empty and not locked.
void drop_empty_grown_rings() noexcept;

}  // namespace weft::detail
