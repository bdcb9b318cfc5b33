package io.netty.contrib.channel.rdma;

/**
 * A work request id says which channel the completion belongs to and what it completes, so the loop
 * dispatches completions without a lookup table per request:
 * {@code [channel id: 32][kind: 8][slot: 24]}.
 */
final class WrId {
    static final int RECV = 1;
    static final int SEND = 2;

    private WrId() {
    }

    static long encode(int channelId, int kind, int slot) {
        return (long) channelId << 32 | (long) kind << 24 | slot & 0xFF_FFFFL;
    }

    static int channelId(long wrId) {
        return (int) (wrId >>> 32);
    }

    static int kind(long wrId) {
        return (int) (wrId >>> 24) & 0xFF;
    }

    static int slot(long wrId) {
        return (int) wrId & 0xFF_FFFF;
    }
}
