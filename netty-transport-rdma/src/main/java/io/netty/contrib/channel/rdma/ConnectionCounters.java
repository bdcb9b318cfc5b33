package io.netty.contrib.channel.rdma;

/**
 * What one connection did, counted on its event loop with plain increments (nothing is paid for counting), read
 * from any thread through {@link RdmaChannelMetric}: a value read elsewhere may lag behind the loop by a little.
 */
final class ConnectionCounters {
    long bytesWritten;
    long bytesRead;
    long sends;
    long ringWrites;
    long coalescedWrites;
    long coalescedSends;
    long creditStalls;
    long creditStallNanos;
    long ringsOffered;
    long ringsWithdrawn;
    long copies;
    long zeroCopyBuffers;
    long keepAliveProbes;
    /** When the current credit stall began (System.nanoTime()), or 0. Loop thread only. */
    long stalledSince;

    /** A write stopped for want of the peer's credits or ring space. */
    void stalled() {
        if (stalledSince == 0) {
            creditStalls++;
            stalledSince = System.nanoTime();
        }
    }

    /** A write went out: a stall, if there was one, is over. */
    void progressed() {
        if (stalledSince != 0) {
            creditStallNanos += System.nanoTime() - stalledSince;
            stalledSince = 0;
        }
    }
}
