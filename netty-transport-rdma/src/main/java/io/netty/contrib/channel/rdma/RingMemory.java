package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.memory.PageMode;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;

import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The receive-ring memory of one loop's connections together, bounded by {@link RdmaIoHandlerConfig#ringMemory}:
 * what the loop's peers can make it pin through rings, whatever their number. Rings are carved from one
 * {@link RingArena} per protection domain, which registers blocks as rings are asked for.
 *
 * <p>Rings share the memory fairly among the connections that stream: a new ring gets at most its
 * {@linkplain #share() share} (a quarter of the loop's ring memory divided by the connections that have or want
 * a ring, a power of two, all of it for a single connection), at most what is left, and none when that is under
 * the connection's minimum (its large messages go on as SENDs, and it gets a ring once others have given theirs
 * back). A ring more than twice its share while others wait for one, or above its share while the rings take
 * more than a quarter of the memory, is {@linkplain #oversized withdrawn}, and offered again at its share when
 * its peer next asks. Sizes are decided on the loop thread; a ring's memory may be freed on another (the last
 * buffer over it released there), hence the atomics.
 */
final class RingMemory {
    /** The smallest ring worth offering: its slabs (several receive slots each) beat slot-sized SENDs. */
    static final int MIN_RING = 64 * 1024;
    private static final int PAGE = 4096;

    private final long limit;
    /** Bytes of rings alive (current, retired, held). */
    private final AtomicLong pinned = new AtomicLong();
    /** Bytes registered in the arenas' blocks and dedicated rings. */
    private final AtomicLong registered = new AtomicLong();
    /** Connections that have a ring now. */
    private int holding;
    /** Connections that asked for a ring and have none. */
    private int waiting;
    private final Map<ProtectionDomain, RingArena> arenas = new IdentityHashMap<>();

    RingMemory(long limit) {
        this.limit = limit;
    }

    /** The arena on {@code pd} (created on first use). Loop thread. */
    RingArena arena(ProtectionDomain pd, PageMode pageMode) {
        return arenas.computeIfAbsent(pd, p -> new RingArena(p, pageMode, this));
    }

    /** A connection moved between having no ring (0), waiting for one (1) and having one (2). Loop thread. */
    void demand(int from, int to) {
        count(from, -1);
        count(to, 1);
    }

    private void count(int state, int delta) {
        if (state == 1) {
            waiting += delta;
        } else if (state == 2) {
            holding += delta;
        }
    }

    /**
     * What each streaming connection's ring may have (a power of two): all of the limit for one connection; for
     * several, a quarter of the limit over their number ({@link #streamingTarget}), but never less than
     * {@link #MIN_RING} while the limit itself has that much for each.
     */
    long share() {
        int n = Math.max(1, holding + waiting);
        long share = n == 1 ? limit : Math.max(streamingTarget() / n, Math.min(limit / n, MIN_RING));
        return share < PAGE ? share & -PAGE : Long.highestOneBit(share);
    }

    /**
     * The bytes the rings of several streaming connections aim to take together: a quarter of the limit. The
     * device writes every ring byte it delivers, so the rings that take writes at once are the receive side's
     * working set, in the cache or not; between two JVMs on the software device, eight 64 KiB and 1 MiB streams ran
     * 0.6-0.77 times as fast with eight 4 MiB rings (32 MiB) as with eight of 2 MiB (docs/benchmarks/rings.md).
     * The rest of the limit is room for rings that are retired, held or not yet shrunk.
     */
    long streamingTarget() {
        return limit / 4;
    }

    /**
     * The size a new ring for a connection that wants {@code wanted} bytes may have now (a multiple of 4096), or 0
     * when it would be under {@code minimum} (or under {@code wanted}, if that is smaller).
     */
    int sizeFor(int wanted, int minimum) {
        long left = limit - pinned.get();
        long size = Math.min(Math.min(wanted, share()), left) & -PAGE;
        return size >= Math.min(minimum, wanted) && size > 0 ? (int) size : 0;
    }

    /**
     * Whether a ring of {@code size} bytes should make room: more than twice the share while connections wait for
     * a ring, or more than the share while the rings take more than the {@link #streamingTarget}; in both cases
     * only while the share is a ring worth offering ({@code minimum}). Below that, withdrawing would give the room
     * to nobody. A withdrawn ring is offered again at the share when its peer next asks.
     */
    boolean oversized(long size, int minimum) {
        long share = share();
        return share >= minimum && (waiting > 0 && size > 2 * share
                || size > share && pinned.get() > streamingTarget());
    }

    void reserve(long bytes) {
        pinned.addAndGet(bytes);
    }

    void release(long bytes) {
        pinned.addAndGet(-bytes);
    }

    /** Bytes registered for rings changed by {@code delta}. */
    void registered(long delta) {
        registered.addAndGet(delta);
    }

    /** Bytes of rings alive now (current, retired and those kept alive by held buffers). */
    long pinned() {
        return pinned.get();
    }

    /** Bytes registered for rings now: the arenas' blocks and rings of their own. */
    long registered() {
        return registered.get();
    }

    long limit() {
        return limit;
    }

    /** Rings with a region of their own (PD-wide rkeys) alive now, and their protection domains. */
    private final Map<ReceiveRing, ProtectionDomain> ownRegions = new java.util.concurrent.ConcurrentHashMap<>();

    /** {@code ring} has a region of its own on {@code pd} until {@link #ownRegionFreed}. */
    void ownRegion(ReceiveRing ring, ProtectionDomain pd) {
        ownRegions.put(ring, pd);
    }

    void ownRegionFreed(ReceiveRing ring) {
        ownRegions.remove(ring);
    }

    /**
     * The device of {@code pd} was removed and its connections are closed: every ring region on it is deregistered
     * now, held or not (held buffers keep the memory), so that {@code pd} can be freed. Loop thread.
     */
    void deviceRemoved(ProtectionDomain pd) {
        RingArena arena = arenas.remove(pd);
        if (arena != null) {
            arena.deviceRemoved();
        }
        ownRegions.forEach((ring, p) -> {
            if (p == pd) {
                ring.mr.close();
            }
        });
    }

    /** The loop ends: blocks no ring uses are deregistered. */
    void close() {
        arenas.values().forEach(RingArena::close);
    }
}
