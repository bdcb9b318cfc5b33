package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.buffer.ByteBuf;

/**
 * A buffer in registered memory: the transport posts it as an SGE as it is, with no lookup and no copy.
 */
public interface RegisteredBuffer {

    /** What {@link #lkey(ByteBuf, RegisteredMemoryPool)} returns for a buffer it cannot send in place. */
    long NOT_REGISTERED = -1;

    /** Address of index 0. */
    long memoryAddress();

    /** Local key of the memory region holding this buffer. Changes if the buffer grows. */
    int lkey();

    /** The pool, hence the protection domain, whose registration {@link #lkey()} belongs to. */
    RegisteredMemoryPool pool();

    /**
     * The lkey under which {@code buf} (possibly a slice, duplicate, read-only or leak-detection wrapper of a
     * pool buffer) can be sent in place: its bytes are at {@code buf.memoryAddress() + index}. Returns the lkey
     * as an unsigned value, or {@link #NOT_REGISTERED} for heap, composite, foreign buffers and buffers of
     * another pool (whose protection domain may differ). Allocation-free.
     */
    static long lkey(ByteBuf buf, RegisteredMemoryPool pool) {
        for (ByteBuf b = buf; b != null; b = b.unwrap()) {
            if (b instanceof RegisteredBuffer registered) {
                if (registered.pool() != pool || !buf.hasMemoryAddress()) {
                    return NOT_REGISTERED;
                }
                // A derived buffer must lie inside its root; anything else would make the device fault.
                long start = buf.memoryAddress();
                long rootStart = registered.memoryAddress();
                return start >= rootStart && start + buf.capacity() <= rootStart + b.capacity()
                        ? registered.lkey() & 0xFFFFFFFFL : NOT_REGISTERED;
            }
        }
        return NOT_REGISTERED;
    }
}
