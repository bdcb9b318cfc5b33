package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.EventLoop;
import io.netty.contrib.channel.rdma.internal.memory.ExternalRegion;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrationException;
import io.netty.contrib.channel.rdma.internal.memory.PinnedMemoryWatch;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.protocol.RingSlabs;
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
 * A connection's receive ring: memory carved from the loop's {@link RingArena}, cut into slabs, the only memory a
 * peer may write remotely, for the peer's RDMA WRITE WITH IMMEDIATE. A connection has one only while large messages
 * flow (docs/PROTOCOL.md §3). The arena's region grants no remote access: each slab is writable through a type-2 memory
 * window of its own, bound to the connection's queue pair while the slab is the writer's, invalidated
 * ({@code LOCAL_INV}) once the writer has left it and before any of its bytes is delivered, and bound again under
 * the next rkey when the reader has released every write in it ({@link RingSlabs}). So the bytes the reader holds
 * are outside every window of the peer. The ring's span stays carved until the connection and every buffer handed
 * out over it have let go. (With PD-wide rkeys explicitly allowed, a ring is a region of its own instead.)
 */
final class ReceiveRing extends ExternalRegion {
    private static final int PAGE = 4096;
    /** Slabs of a ring at most: a RING message with sixteen rkeys is 88 bytes. */
    static final int MAX_SLABS = 16;
    /** The smallest slab worth cutting. */
    private static final int MIN_SLAB = 16 * 1024;
    /**
     * The slab size a large ring is cut into: fewer, larger slabs make fewer ring writes, invalidations and binds
     * per byte (a 1 MiB ring in four slabs streamed 1 MiB messages 1.4-2.3 times as fast as in sixteen, in one JVM).
     */
    private static final int SLAB_TARGET = 256 * 1024;

    /** Who hears about buffers over the ring released by the reader. */
    interface Owner {
        /** A buffer over {@code ring} covering a write in {@code slab} was released (loop thread). */
        void ringBufferReleased(ReceiveRing ring, int slab);
    }

    /** The ring's own allocation with PD-wide rkeys; null when it is carved from the loop's arena. */
    private final Arena arena;
    /** Where the ring is carved from, and its span there; null with PD-wide rkeys. */
    private final RingArena ringArena;
    private final RingArena.Span span;
    private final RingMemory budget;
    private final EventLoop loop;
    private final Owner owner;
    final MemorySegment memory;
    /** The region the ring lies in: the arena block's, or with PD-wide rkeys the ring's own. */
    final MemoryRegion mr;
    /** Where the ring starts in {@link #mr}. */
    private final long mrOffset;
    /**
     * The type-2 window of each slab, bound to the connection's queue pair while the slab is the writer's: the only
     * remote access to the ring (the region itself grants none). {@code null} when PD-wide rkeys were allowed
     * explicitly: then the region's rkey covers every slab and nothing is invalidated.
     */
    private MemoryWindow[] windows;
    /** The rkey each slab is bound with now (or was last), announced with the ring; the region's with PD-wide rkeys. */
    final int[] rkeys;
    final long size;
    final RingSlabs slabs;
    /** The immediate's generation bit of writes into this ring. */
    final boolean generation;
    /** Buffers the reader holds over each slab (loop thread). */
    private final int[] held;
    /** Slabs with buffers held. */
    int heldSlabs;
    /** Writes that arrived: an idle ring is given up. */
    long arrivals;
    /**
     * The connection's reference (while current or while writes may still land) plus one per buffer held and one
     * per invalidation in flight. Atomic only for buffers released after the loop stopped.
     */
    final AtomicInteger refs = new AtomicInteger(1);

    private ReceiveRing(Arena arena, RingArena ringArena, RingArena.Span span, RingMemory budget,
                        MemorySegment memory, MemoryRegion mr, long mrOffset, MemoryWindow[] windows, int slabCount,
                        boolean generation, RdmaByteBufAllocator alloc, EventLoop loop, Owner owner) {
        super(memory, mr.lkey(), alloc.pool());
        this.arena = arena;
        this.ringArena = ringArena;
        this.span = span;
        this.budget = budget;
        this.memory = memory;
        this.mr = mr;
        this.mrOffset = mrOffset;
        this.windows = windows;
        this.size = memory.byteSize();
        this.slabs = new RingSlabs(slabCount, size / slabCount);
        this.rkeys = new int[slabCount];
        for (int k = 0; k < slabCount; k++) {
            rkeys[k] = windows == null ? mr.rkey() : windows[k].nextRkey();
        }
        this.held = new int[slabCount];
        this.generation = generation;
        this.loop = loop;
        this.owner = owner;
    }

    /**
     * How many slabs a ring of {@code size} bytes is cut into: one per {@link #SLAB_TARGET} bytes, but four where
     * slabs of at least {@link #MIN_SLAB} and four receive slots (a ring write is larger than a slot) allow it, so
     * that the writer has slabs to fill while others come back; at most {@link #MAX_SLABS} and as many as the RING
     * message announcing them fits the peer's receive slot ({@code peerSlot} bytes). A 1 MiB ring has four slabs of
     * 256 KiB, a 4 MiB ring sixteen, a 128 KiB ring four of 32 KiB.
     */
    static int slabCount(int size, int slotSize, int peerSlot) {
        int bySize = Math.max(size / SLAB_TARGET, Math.min(4, size / Math.max(MIN_SLAB, 4 * slotSize)));
        int byMessage = (peerSlot - MessageHeader.LENGTH - MessageHeader.RING_FIXED_PAYLOAD) / 4;
        return Math.max(1, Math.min(MAX_SLABS, Math.min(bySize, byMessage)));
    }

    /**
     * A ring of about {@code size} bytes (rounded down to {@code slabCount} equal slabs) for remote writes: carved
     * from the loop's {@link RingArena} on {@code pd}, zeroed, with a type-2 window per slab to bind on the
     * connection's queue pair ({@link #bindWindows}) before the rkeys are announced; or, with {@code pdWide}, a
     * region of its own whose rkey grants remote writes on every queue pair of the protection domain (never a
     * block shared with other connections' rings).
     *
     * @param budget the loop's ring memory, which the ring counts against until its memory is freed
     * @throws MemoryRegistrationException when the device refuses the registration
     */
    static ReceiveRing create(ProtectionDomain pd, RingMemory budget, int size, int slabCount, boolean pdWide,
                              boolean generation, RdmaByteBufAllocator alloc, EventLoop loop, Owner owner) {
        long slabSize = (long) size / slabCount & -(long) Immediate.ALIGNMENT;
        long ringSize = slabSize * slabCount;
        ReceiveRing ring = pdWide ? dedicated(pd, budget, ringSize, slabCount, generation, alloc, loop, owner)
                : carved(pd, budget, ringSize, slabCount, generation, alloc, loop, owner);
        budget.reserve(ring.size);
        return ring;
    }

    private static ReceiveRing carved(ProtectionDomain pd, RingMemory budget, long ringSize, int slabCount,
                                      boolean generation, RdmaByteBufAllocator alloc, EventLoop loop, Owner owner) {
        RingArena ringArena = budget.arena(pd, alloc.pool().pageMode());
        RingArena.Span span = ringArena.allocate(ringSize);
        MemoryWindow[] windows = new MemoryWindow[slabCount];
        try {
            for (int k = 0; k < slabCount; k++) {
                windows[k] = pd.allocMw(IbvMwType.TYPE_2);
            }
            return new ReceiveRing(null, ringArena, span, budget, span.block().memory.asSlice(span.offset(),
                    ringSize), span.mr(), span.offset(), windows, slabCount, generation, alloc, loop, owner);
        } catch (RuntimeException e) {
            closeAll(windows);
            ringArena.free(span);
            throw e;
        }
    }

    private static ReceiveRing dedicated(ProtectionDomain pd, RingMemory budget, long ringSize, int slabCount,
                                         boolean generation, RdmaByteBufAllocator alloc, EventLoop loop,
                                         Owner owner) {
        Arena arena = Arena.ofShared();
        MemoryRegion mr = null;
        try {
            MemorySegment memory = arena.allocate(ringSize, PAGE);
            // Allocated zeroed, so every page exists before registration: copy-on-write after it would silently
            // break the mapping.
            try {
                mr = pd.registerMemory(memory, IbvAccessFlags.LOCAL_WRITE | IbvAccessFlags.REMOTE_WRITE);
            } catch (VerbsException e) {
                throw MemoryRegistrationException.of("a connection's receive ring", ringSize, e);
            }
            PinnedMemoryWatch.registered();
            ReceiveRing ring = new ReceiveRing(arena, null, null, budget, memory, mr, 0, null, slabCount, generation,
                    alloc, loop, owner);
            budget.registered(ringSize);
            budget.ownRegion(ring, pd);
            return ring;
        } catch (RuntimeException e) {
            if (mr != null) {
                mr.close();
            }
            arena.close();
            throw e;
        }
    }

    private static void closeAll(MemoryWindow[] windows) {
        if (windows != null) {
            for (MemoryWindow w : windows) {
                if (w != null) {
                    w.close();
                }
            }
        }
    }

    /**
     * Adds to {@code sends} the binds of every slab's window to the queue pair the batch is posted on, before the
     * RING message that announces {@link #rkeys}: send queue order makes the windows valid before the peer can use
     * them. Call {@link #windowsBound()} once the batch is posted.
     */
    void bindWindows(SendQueue sends) {
        if (windows != null) {
            long slabSize = slabs.slabSize();
            for (int k = 0; k < windows.length; k++) {
                sends.bindWindow(windows[k], rkeys[k], mr, mrOffset + k * slabSize, slabSize);
            }
        }
    }

    /** The batch with the binds was posted: the windows' rkeys are the ones announced. */
    void windowsBound() {
        if (windows != null) {
            for (int k = 0; k < windows.length; k++) {
                windows[k].updateRkey(rkeys[k]);
            }
        }
    }

    /** Whether the slabs have windows to invalidate and bind again (not with PD-wide rkeys). */
    boolean hasWindows() {
        return windows != null;
    }

    /** The rkey {@code slab}'s window is bound with now: the only one a SEAL message may invalidate. */
    int windowRkey(int slab) {
        return windows[slab].rkey();
    }

    /** Adds the invalidation of {@code slab}'s window to {@code sends}; it holds a reference until it completes. */
    void invalidate(SendQueue sends, int slab) {
        refs.incrementAndGet();
        sends.invalidate(windows[slab], this, slab);
    }

    /** Adds the bind of {@code slab}'s window under its next rkey; call {@link #rebound} once posted. */
    void rebind(SendQueue sends, int slab) {
        long slabSize = slabs.slabSize();
        sends.bindWindow(windows[slab], windows[slab].nextRkey(), mr, mrOffset + slab * slabSize, slabSize);
    }

    /** The bind of {@code slab} was posted: its window has the next rkey, which the writer derives itself. */
    void rebound(int slab) {
        int rkey = windows[slab].nextRkey();
        windows[slab].updateRkey(rkey);
        rkeys[slab] = rkey;
    }

    /**
     * Ends remote access to the ring: every window is deallocated (which invalidates it). Held buffers may still
     * read the memory; the peer can no longer write it. Idempotent; before the queue pair is destroyed, and never
     * while an invalidation of one of them is in flight on a live queue pair.
     */
    void closeWindows() {
        MemoryWindow[] w = windows;
        windows = null;
        closeAll(w);
    }

    /** A leak-aware buffer over a write of {@code length} bytes at {@code address} in {@code slab}; holds a reference. */
    ByteBuf heldBuffer(RdmaByteBufAllocator alloc, long address, int length, int slab) {
        if (held[slab]++ == 0) {
            heldSlabs++;
        }
        refs.incrementAndGet();
        return alloc.leakAware(buffer((io.netty.buffer.ByteBufAllocator) alloc, address - memory.address(), length,
                slab));
    }

    /** A buffer over {@code slab} was released. */
    void bufferReleased(int slab) {
        if (--held[slab] == 0) {
            heldSlabs--;
        }
    }

    /** Whether the reader holds buffers over {@code slab}. */
    boolean holds(int slab) {
        return held[slab] > 0;
    }

    void unref() {
        if (refs.decrementAndGet() == 0) {
            try {
                closeWindows();
                if (span != null) {
                    ringArena.free(span);
                } else {
                    try {
                        mr.close();
                    } finally {
                        arena.close();
                        budget.registered(-size);
                        budget.ownRegionFreed(this);
                    }
                }
            } finally {
                budget.release(size);
            }
        }
    }

    @Override
    protected void released(long slab) {
        if (loop.inEventLoop()) {
            owner.ringBufferReleased(this, (int) slab);
            return;
        }
        try {
            loop.execute(() -> owner.ringBufferReleased(this, (int) slab));
        } catch (RejectedExecutionException e) {
            // The loop has stopped, and with it the connection: only the memory is left to free.
            unref();
        }
    }

    @Override
    public String toString() {
        return "ReceiveRing{size=" + size + ", generation=" + generation + ", heldSlabs=" + heldSlabs + ", "
                + slabs + ", refs=" + refs.get() + '}';
    }
}
