package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.buffer.ByteBuf;

/**
 * What a stream announces to the sink before its messages: the bytes that follow (u64), and, when its top bit
 * ({@link #SEQUENCED}) is set, a second u64: the size of each message, whose first 8 bytes are its sequence number
 * from 0, which the sink checks. Read a byte at a time, across buffers (8 bytes shifted in replace a field).
 */
final class SinkHeader {
    static final long SEQUENCED = 1L << 63;

    private long first;
    private long second;
    private int read;

    /** Reads what {@code buf} has of the header; {@code true} once it is whole (then it starts over). */
    boolean read(ByteBuf buf) {
        while (buf.isReadable()) {
            int b = buf.readUnsignedByte();
            if (read < Long.BYTES) {
                first = first << 8 | b;
            } else {
                second = second << 8 | b;
            }
            read++;
            if (read == Long.BYTES && (first & SEQUENCED) == 0 || read == 2 * Long.BYTES) {
                read = 0;
                return true;
            }
        }
        return false;
    }

    long bytes() {
        return first & ~SEQUENCED;
    }

    /** 0 when the stream is not sequenced. */
    long messageSize() {
        return (first & SEQUENCED) != 0 ? second : 0;
    }

}
