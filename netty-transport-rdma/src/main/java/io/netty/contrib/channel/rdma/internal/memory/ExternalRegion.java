package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.lang.foreign.MemorySegment;

/**
 * Registered memory that is not the pool's (a connection's receive ring), handed to readers as buffers without a
 * copy. Each buffer covers a range of the region and tells the owner, once, when it no longer needs it: when it
 * is released, or when it grows and moves into pool memory. The owner keeps the memory alive and registered until
 * then.
 */
public abstract class ExternalRegion {
    private final Chunk chunk;
    private final RegisteredMemoryPool pool;

    /**
     * @param memory the region, registered with {@code lkey} in the protection domain of {@code pool}
     * @param pool   where the buffers move if they grow, and whose protection domain their lkey belongs to
     */
    protected ExternalRegion(MemorySegment memory, int lkey, RegisteredMemoryPool pool) {
        this.chunk = Chunk.external(memory, lkey);
        this.pool = pool;
    }

    /**
     * A buffer over {@code length} bytes at {@code offset}, readable from index 0 to {@code length}.
     * {@link #released(long)} gets {@code token} when the buffer lets go of the range.
     */
    public final ByteBuf buffer(ByteBufAllocator alloc, long offset, int length, long token) {
        if (offset < 0 || length < 0 || offset + length > chunk.size) {
            throw new IndexOutOfBoundsException("range " + offset + "+" + length + " outside the " + chunk.size
                    + "-byte region");
        }
        RegisteredByteBuf buf = RegisteredByteBuf.newInstance(alloc, pool, Integer.MAX_VALUE);
        buf.setExternalMemory(chunk, (int) offset, length, this, token);
        buf.writerIndex(length);
        return buf;
    }

    /** A buffer let go of its range. Called on whatever thread released the buffer, exactly once per buffer. */
    protected abstract void released(long token);
}
