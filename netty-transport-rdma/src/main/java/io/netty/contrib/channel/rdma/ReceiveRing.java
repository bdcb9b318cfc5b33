package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.EventLoop;
import io.netty.contrib.channel.rdma.internal.memory.ExternalRegion;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrationException;
import io.netty.contrib.channel.rdma.internal.memory.PinnedMemoryWatch;
import io.netty.contrib.channel.rdma.internal.protocol.RingReleases;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvMwType;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryWindow;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A connection's receive ring: its own memory region, the only memory a peer may write remotely, for the peer's
 * RDMA WRITE WITH IMMEDIATE. A connection has one only while large messages flow (docs/PROTOCOL.md §3). It stays
 * registered and allocated until the connection and every buffer handed out over it (zero-copy delivery) have
 * let go.
 */
final class ReceiveRing extends ExternalRegion {
    private static final int PAGE = 4096;

    /** Who hears about buffers over the ring released by the reader. */
    interface Owner {
        /** A buffer over {@code ring} covering write {@code seq} was released (loop thread). */
        void ringBufferReleased(ReceiveRing ring, long seq);
    }

    private final Arena arena;
    private final RingMemory budget;
    private final EventLoop loop;
    private final Owner owner;
    final MemorySegment memory;
    final MemoryRegion mr;
    /**
     * The type-2 window bound to the connection's queue pair over the whole ring: the only remote access to it
     * (the region itself grants none). {@code null} when PD-wide rkeys were allowed explicitly.
     */
    private MemoryWindow window;
    /** The rkey the peer gets: the window's (or the region's). */
    final int rkey;
    final long size;
    final RingReleases releases;
    /** The immediate's generation bit of writes into this ring. */
    final boolean generation;
    /** Ring bytes under buffers the reader holds (loop thread). */
    long held;
    /** Writes that arrived: an idle ring is given up. */
    long arrivals;
    /**
     * The connection's reference (while current or while writes may still land) plus one per buffer held.
     * Atomic only for buffers released after the loop stopped.
     */
    final AtomicInteger refs = new AtomicInteger(1);

    private ReceiveRing(Arena arena, RingMemory budget, MemorySegment memory, MemoryRegion mr, MemoryWindow window,
                        boolean generation, int capacity, RdmaByteBufAllocator alloc, EventLoop loop, Owner owner) {
        super(memory, mr.lkey(), alloc.pool());
        this.arena = arena;
        this.budget = budget;
        this.memory = memory;
        this.mr = mr;
        this.window = window;
        this.rkey = window == null ? mr.rkey() : window.nextRkey();
        this.size = memory.byteSize();
        this.releases = new RingReleases(size, capacity);
        this.generation = generation;
        this.loop = loop;
        this.owner = owner;
    }

    /**
     * Allocates, touches and registers a ring of {@code size} bytes for remote writes: with a type-2 window to
     * bind on the connection's queue pair ({@link #bindWindow}) before its rkey is announced, or, with
     * {@code pdWide}, a region whose own rkey grants remote writes on every queue pair of the protection domain.
     *
     * @param budget the loop's ring memory, which the ring counts against until its memory is freed
     * @param capacity writes expected outstanding at once (grows if more are)
     * @throws MemoryRegistrationException when the device refuses the registration
     */
    static ReceiveRing create(ProtectionDomain pd, RingMemory budget, int size, boolean pdWide, boolean generation,
                              int capacity, RdmaByteBufAllocator alloc, EventLoop loop, Owner owner) {
        Arena arena = Arena.ofShared();
        MemoryRegion mr = null;
        try {
            MemorySegment memory = arena.allocate(size, PAGE);
            // Pages must exist before registration: copy-on-write after it would silently break the mapping.
            memory.fill((byte) 0);
            try {
                mr = pd.registerMemory(memory, IbvAccessFlags.LOCAL_WRITE
                        | (pdWide ? IbvAccessFlags.REMOTE_WRITE : IbvAccessFlags.MW_BIND));
            } catch (VerbsException e) {
                throw MemoryRegistrationException.of("a connection's receive ring", size, e);
            }
            PinnedMemoryWatch.registered();
            MemoryWindow window = pdWide ? null : pd.allocMw(IbvMwType.TYPE_2);
            ReceiveRing ring = new ReceiveRing(arena, budget, memory, mr, window, generation, capacity, alloc, loop,
                    owner);
            budget.reserve(ring.size);
            return ring;
        } catch (RuntimeException e) {
            if (mr != null) {
                mr.close();
            }
            arena.close();
            throw e;
        }
    }

    /**
     * Adds to {@code sends} the bind of the window over the ring to the queue pair the batch is posted on, before
     * the RING message that announces {@link #rkey}: send queue order makes the window valid before the peer
     * can use it. Call {@link #windowBound()} once the batch is posted.
     */
    void bindWindow(SendQueue sends) {
        if (window != null) {
            sends.bindWindow(window, rkey, mr, size);
        }
    }

    /** The batch with the bind was posted: the window's rkey is the one announced. */
    void windowBound() {
        if (window != null) {
            window.updateRkey(rkey);
        }
    }

    /**
     * Ends remote access to the ring: the window is deallocated (which invalidates it). Held buffers may still
     * read the memory; the peer can no longer write it. Idempotent; before the queue pair is destroyed.
     */
    void closeWindow() {
        MemoryWindow w = window;
        window = null;
        if (w != null) {
            w.close();
        }
    }

    /** A leak-aware buffer over write {@code seq}, {@code length} bytes at {@code address}; holds a reference. */
    ByteBuf heldBuffer(RdmaByteBufAllocator alloc, long address, int length, long seq) {
        held += releases.span(seq);
        refs.incrementAndGet();
        return alloc.leakAware(buffer((io.netty.buffer.ByteBufAllocator) alloc, address - memory.address(), length,
                seq));
    }

    void unref() {
        if (refs.decrementAndGet() == 0) {
            try {
                closeWindow();
                mr.close();
            } finally {
                arena.close();
                budget.release(size);
            }
        }
    }

    @Override
    protected void released(long seq) {
        if (loop.inEventLoop()) {
            owner.ringBufferReleased(this, seq);
            return;
        }
        try {
            loop.execute(() -> owner.ringBufferReleased(this, seq));
        } catch (RejectedExecutionException e) {
            // The loop has stopped, and with it the connection: only the memory is left to free.
            unref();
        }
    }

    @Override
    public String toString() {
        return "ReceiveRing{size=" + size + ", generation=" + generation + ", held=" + held + ", pinned="
                + releases.pinned() + ", owed=" + releases.owed() + ", outstanding=" + releases.outstanding()
                + ", refs=" + refs.get() + '}';
    }
}
