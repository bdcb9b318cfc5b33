package io.netty.contrib.channel.rdma.internal.memory;

import java.lang.foreign.MemorySegment;

/**
 * Registers pool chunks with the RDMA device. Keeps the allocator independent of the verbs bindings: the
 * transport implements it over a protection domain, tests over a fake.
 *
 * <p>Implementations register with {@code IBV_ACCESS_LOCAL_WRITE} only: pool memory is never remotely
 * accessible (each connection's receive ring has its own MR for that).
 */
public interface MemoryRegistrar {

    /**
     * Registers {@code chunk}, which is page-aligned and already touched. Called only when the pool creates a
     * chunk, never per allocation. May be called from any thread.
     *
     * @throws RuntimeException if the device refuses (e.g. ENOMEM when RLIMIT_MEMLOCK is exceeded)
     */
    Registration register(MemorySegment chunk);

    /** One registered chunk. */
    interface Registration {

        /** The local key to put in SGEs that point into the chunk. */
        int lkey();

        /** Deregisters the chunk; it is freed right after. */
        void close();
    }
}
