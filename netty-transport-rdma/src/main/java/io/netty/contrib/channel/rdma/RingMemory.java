package io.netty.contrib.channel.rdma;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The receive-ring memory of one loop's connections together, bounded by {@link RdmaIoHandlerConfig#ringMemory}:
 * what the loop's peers can make it pin through rings, whatever their number. A ring is sized when it is offered:
 * a whole {@code RING_SIZE} while it fits and no other ring is pinned, else at most half of what is left, so that
 * later connections still get one; none when that is under the connection's minimum (its large messages go on as
 * SENDs, and it gets a ring once others have given theirs back). Rings are reserved on the loop thread; a ring's
 * memory may be freed on another (the last buffer over it released there), hence the atomic.
 */
final class RingMemory {
    /** The smallest ring worth offering: its slabs (several receive slots each) beat slot-sized SENDs. */
    static final int MIN_RING = 64 * 1024;
    private static final int PAGE = 4096;

    private final long limit;
    private final AtomicLong pinned = new AtomicLong();

    RingMemory(long limit) {
        this.limit = limit;
    }

    /**
     * The size a new ring for a connection that wants {@code wanted} bytes may have now (a multiple of 4096), or 0
     * when it would be under {@code minimum} (or under {@code wanted}, if that is smaller).
     */
    int sizeFor(int wanted, int minimum) {
        long left = limit - pinned.get();
        long size = Math.min(wanted, pinned.get() == 0 ? left : left / 2) & -PAGE;
        return size >= Math.min(minimum, wanted) && size > 0 ? (int) size : 0;
    }

    void reserve(long bytes) {
        pinned.addAndGet(bytes);
    }

    void release(long bytes) {
        pinned.addAndGet(-bytes);
    }

    /** Bytes of rings registered now (current, retired and those kept alive by held buffers). */
    long pinned() {
        return pinned.get();
    }

    long limit() {
        return limit;
    }
}
