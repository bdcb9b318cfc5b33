package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.memory.MappedMemory;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrationException;
import io.netty.contrib.channel.rdma.internal.memory.PageMode;
import io.netty.contrib.channel.rdma.internal.memory.PinnedMemory;
import io.netty.contrib.channel.rdma.internal.memory.PinnedMemoryWatch;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The receive-ring memory of one loop on one protection domain: registered blocks, carved into the rings of all
 * the loop's connections there, instead of a registration per ring. A block is registered once for local writes
 * and window binds only ({@code LOCAL_WRITE | MW_BIND}): it grants no remote access itself, each ring slab is reached
 * only through a type-2 window bound to its own connection's queue pair ({@link ReceiveRing}). Blocks are
 * {@link #BLOCK} bytes (two 2 MiB pages where the pool's page mode gives huge pages), a ring larger than that has a
 * block of its own; blocks are added as rings are asked for, up to the loop's ring memory and to half of what
 * {@code RLIMIT_MEMLOCK} leaves, and an empty block is given back (one is kept for the next ring).
 *
 * <p>A span is zeroed when it is handed out: a ring carved where another connection's ring was must not show that
 * connection's bytes, whatever its peer claims to have written where. Thread-safe (a ring's last buffer may be
 * released on another thread once the loop has stopped); rings are carved on the loop thread.
 */
final class RingArena {
    /** Bytes of a shared block. */
    static final long BLOCK = 4L << 20;
    private static final long PAGE = 4096;
    private static final long MEMLOCK_RECHECK_NANOS = 1_000_000_000L;

    /** A ring's memory: {@code size} bytes at {@code offset} in {@code block}, registered as {@code block.mr}. */
    record Span(Block block, long offset, long size) {
        MemorySegment memory() {
            return block.memory.asSlice(offset, size);
        }

        MemoryRegion mr() {
            return block.mr;
        }
    }

    /** One registered mapping and its free extents (offset to length, coalesced). */
    static final class Block {
        private final Arena arena;
        final MemorySegment memory;
        final MemoryRegion mr;
        private final TreeMap<Long, Long> free = new TreeMap<>();
        private long used;

        private Block(Arena arena, MemorySegment memory, MemoryRegion mr) {
            this.arena = arena;
            this.memory = memory;
            this.mr = mr;
            free.put(0L, memory.byteSize());
        }

        /** First fit: the offset of {@code size} bytes taken, or -1. */
        long take(long size) {
            for (Map.Entry<Long, Long> e : free.entrySet()) {
                if (e.getValue() >= size) {
                    long offset = e.getKey();
                    free.remove(offset);
                    if (e.getValue() > size) {
                        free.put(offset + size, e.getValue() - size);
                    }
                    used += size;
                    return offset;
                }
            }
            return -1;
        }

        void give(long offset, long size) {
            used -= size;
            long start = offset;
            long length = size;
            Map.Entry<Long, Long> before = free.floorEntry(offset);
            if (before != null && before.getKey() + before.getValue() == offset) {
                start = before.getKey();
                length += before.getValue();
                free.remove(before.getKey());
            }
            Long after = free.get(offset + size);
            if (after != null) {
                free.remove(offset + size);
                length += after;
            }
            free.put(start, length);
        }

        boolean fits(long size) {
            for (long length : free.values()) {
                if (length >= size) {
                    return true;
                }
            }
            return false;
        }

        boolean isEmpty() {
            return used == 0;
        }

        long size() {
            return memory.byteSize();
        }

        void close() {
            try {
                mr.close();
            } finally {
                arena.close();
            }
        }
    }

    private static final RefusalLog REFUSALS = new RefusalLog(
            io.netty.util.internal.logging.InternalLoggerFactory.getInstance(RingArena.class), "receive rings");

    private final ProtectionDomain pd;
    private final PageMode pageMode;
    private final RingMemory budget;
    private final List<Block> blocks = new ArrayList<>();
    /** The loop ended: no empty block is kept. */
    private boolean closed;
    /** Until when growth stays refused for RLIMIT_MEMLOCK without reading the process's status again. */
    private long memlockRefusedUntil;
    private boolean memlockRefused;

    RingArena(ProtectionDomain pd, PageMode pageMode, RingMemory budget) {
        this.pd = pd;
        this.pageMode = pageMode;
        this.budget = budget;
    }

    /** The size a ring of {@code size} bytes takes here: whole pages. */
    static long spanSize(long size) {
        return (size + PAGE - 1) & -PAGE;
    }

    /**
     * Whether a ring of {@code size} bytes can be carved now: it fits in a block, or a new block may be registered
     * within the loop's ring memory and {@code RLIMIT_MEMLOCK}.
     */
    synchronized boolean fits(long size) {
        long span = spanSize(size);
        for (Block b : blocks) {
            if (b.fits(span)) {
                return true;
            }
        }
        return mayGrow(blockSize(span), size);
    }

    /**
     * Carves a zeroed ring of {@code size} bytes.
     *
     * @throws IllegalStateException       when it does not {@linkplain #fits fit}
     * @throws MemoryRegistrationException when the device refuses a new block
     */
    synchronized Span allocate(long size) {
        long span = spanSize(size);
        for (Block b : blocks) {
            long offset = b.take(span);
            if (offset >= 0) {
                Span s = new Span(b, offset, span);
                // Warm memory: a memset, no page faults.
                s.memory().fill((byte) 0);
                return s;
            }
        }
        long blockSize = blockSize(span);
        if (mayGrow(blockSize, size)) {
            // The empty block kept for the next ring goes if the new one would not fit beside it.
            dropEmptyIfOver(blockSize);
        } else {
            throw new IllegalStateException("the loop's ring memory (" + budget.limit() + " bytes, "
                    + budget.registered() + " registered) has no room for a ring of " + span + " bytes");
        }
        Block b = register(blockSize);
        blocks.add(b);
        budget.registered(blockSize);
        // Fresh mappings are zero.
        return new Span(b, b.take(span), span);
    }

    /** Gives a ring's memory back; an empty block is deregistered unless it is the only one. */
    synchronized void free(Span s) {
        Block b = s.block;
        b.give(s.offset, s.size);
        if (b.isEmpty() && (closed || b.size() != BLOCK || blocks.size() > 1)) {
            blocks.remove(b);
            budget.registered(-b.size());
            b.close();
        }
    }

    /** The loop ends: deregisters the blocks nobody uses; rings still held keep theirs until freed. */
    synchronized void close() {
        closed = true;
        for (int i = blocks.size() - 1; i >= 0; i--) {
            Block b = blocks.get(i);
            if (b.isEmpty()) {
                blocks.remove(i);
                budget.registered(-b.size());
                b.close();
            }
        }
    }

    /**
     * The device was removed: every block is deregistered now; empty ones are freed, the memory of the others stays
     * for the buffers held over it and goes when they are released.
     */
    synchronized void deviceRemoved() {
        close();
        for (Block b : blocks) {
            b.mr.close();
        }
    }

    /** Bytes registered in blocks. */
    synchronized long registered() {
        long sum = 0;
        for (Block b : blocks) {
            sum += b.size();
        }
        return sum;
    }

    private static long blockSize(long span) {
        return span <= BLOCK ? BLOCK : (span + BLOCK - 1) / BLOCK * BLOCK;
    }

    private boolean mayGrow(long blockSize, long ringSize) {
        // A block beyond the ring memory only for the first ring of a loop whose limit is below one block. An empty
        // block kept would be given back for it.
        if (budget.registered() - emptyBytes() + blockSize > Math.max(budget.limit(), blockSize)
                || budget.limit() == 0) {
            return false;
        }
        long now = System.nanoTime();
        if (memlockRefused && now - memlockRefusedUntil < 0) {
            // Connections waiting for a ring ask at every flush: /proc/self/status is read once a second at most.
            return false;
        }
        PinnedMemory.Snapshot pinned = PinnedMemory.snapshot();
        // Rings take at most half of what RLIMIT_MEMLOCK leaves: the pool and the queues need the rest.
        if (!pinned.limited() || pinned.pinned() + 2 * blockSize <= pinned.limit()) {
            memlockRefused = false;
            return true;
        }
        memlockRefused = true;
        memlockRefusedUntil = now + MEMLOCK_RECHECK_NANOS;
        // Every connection that asks meanwhile is refused the same way: one line and a count.
        REFUSALS.log(RefusalLog.Kind.RING_FAILED, "no receive ring of " + ringSize + " bytes offered: another "
                + MemoryRegistrationException.formatSize(blockSize) + " of ring memory would leave less than half of"
                + " what RLIMIT_MEMLOCK allows unpinned (" + pinned + "); large messages go on as SENDs. Raise it"
                + " with ulimit -l, LimitMEMLOCK= in the systemd unit, or --ulimit memlock=-1 in docker (or grant"
                + " CAP_IPC_LOCK)", null);
        return false;
    }

    private long emptyBytes() {
        long sum = 0;
        for (Block b : blocks) {
            if (b.isEmpty()) {
                sum += b.size();
            }
        }
        return sum;
    }

    private void dropEmptyIfOver(long blockSize) {
        if (budget.registered() + blockSize > Math.max(budget.limit(), blockSize)) {
            for (int i = blocks.size() - 1; i >= 0; i--) {
                Block b = blocks.get(i);
                if (b.isEmpty()) {
                    blocks.remove(i);
                    budget.registered(-b.size());
                    b.close();
                }
            }
        }
    }

    private Block register(long size) {
        Arena arena = Arena.ofShared();
        try {
            // The hugetlb pool is the allocator's: rings take transparent huge pages where they can.
            MemorySegment memory = MappedMemory.map(arena, size,
                    pageMode == PageMode.EXPLICIT ? PageMode.AUTO : pageMode).memory();
            MemoryRegion mr;
            try {
                mr = pd.registerMemory(memory, IbvAccessFlags.LOCAL_WRITE | IbvAccessFlags.MW_BIND);
            } catch (VerbsException e) {
                throw MemoryRegistrationException.of("the loop's receive rings", size, e);
            }
            PinnedMemoryWatch.registered();
            return new Block(arena, memory, mr);
        } catch (Throwable t) {
            arena.close();
            throw t;
        }
    }
}
