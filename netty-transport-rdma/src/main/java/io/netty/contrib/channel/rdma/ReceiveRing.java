package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.EventLoop;
import io.netty.contrib.channel.rdma.internal.memory.ExternalRegion;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrationException;
import io.netty.contrib.channel.rdma.internal.protocol.RingReleases;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
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
    private final EventLoop loop;
    private final Owner owner;
    final MemorySegment memory;
    final MemoryRegion mr;
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

    private ReceiveRing(Arena arena, MemorySegment memory, MemoryRegion mr, boolean generation, int capacity,
                        RdmaByteBufAllocator alloc, EventLoop loop, Owner owner) {
        super(memory, mr.lkey(), alloc.pool());
        this.arena = arena;
        this.memory = memory;
        this.mr = mr;
        this.size = memory.byteSize();
        this.releases = new RingReleases(size, capacity);
        this.generation = generation;
        this.loop = loop;
        this.owner = owner;
    }

    /**
     * Allocates, touches and registers a ring of {@code size} bytes for remote writes.
     *
     * @param capacity writes expected outstanding at once (grows if more are)
     * @throws MemoryRegistrationException when the device refuses the registration
     */
    static ReceiveRing create(ProtectionDomain pd, int size, boolean generation, int capacity,
                              RdmaByteBufAllocator alloc, EventLoop loop, Owner owner) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment memory = arena.allocate(size, PAGE);
            // Pages must exist before registration: copy-on-write after it would silently break the mapping.
            memory.fill((byte) 0);
            MemoryRegion mr;
            try {
                mr = pd.registerMemory(memory, IbvAccessFlags.LOCAL_WRITE | IbvAccessFlags.REMOTE_WRITE);
            } catch (VerbsException e) {
                throw MemoryRegistrationException.of("a connection's receive ring", size, e);
            }
            return new ReceiveRing(arena, memory, mr, generation, capacity, alloc, loop, owner);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
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
                mr.close();
            } finally {
                arena.close();
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
