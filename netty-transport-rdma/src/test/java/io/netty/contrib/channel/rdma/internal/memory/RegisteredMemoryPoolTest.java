package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.buffer.ByteBufAllocator;
import io.netty.util.concurrent.FastThreadLocalThread;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

class RegisteredMemoryPoolTest {
    private final FakeRegistrar registrar = new FakeRegistrar();
    private final RegisteredMemoryPool pool = new RegisteredMemoryPool(registrar, 1 << 20, 256 << 10, 1);

    @AfterEach
    void close() {
        pool.close();
        assertThat(registrar.liveRegistrations()).isZero();
    }

    @Test
    void sizeClassesArePowersOfTwoFrom64B() {
        assertThat(RegisteredMemoryPool.sizeClass(0)).isZero();
        assertThat(RegisteredMemoryPool.sizeClass(64)).isZero();
        assertThat(RegisteredMemoryPool.sizeClass(65)).isEqualTo(1);
        assertThat(RegisteredMemoryPool.sizeClass(128)).isEqualTo(1);
        assertThat(RegisteredMemoryPool.classSize(RegisteredMemoryPool.sizeClass(4097))).isEqualTo(8192);
        assertThat(RegisteredMemoryPool.classSize(RegisteredMemoryPool.sizeClass(1 << 20))).isEqualTo(1 << 20);
    }

    @Test
    void liveSlotsNeverOverlapAndLieInTheirRegistration() throws Exception {
        // Twice: on a plain thread (shared pool only) and on an event-loop thread (through its cache).
        checkSlots();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread loop = new FastThreadLocalThread(() -> {
            try {
                checkSlots();
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        loop.start();
        loop.join();
        assertThat(failure.get()).isNull();
        assertThat(pool.usedMemory()).isZero();
        assertThat(pool.chunkCount()).as("one empty chunk retained").isEqualTo(1);
    }

    private void checkSlots() {
        SplittableRandom random = new SplittableRandom(3);
        List<RegisteredByteBuf> live = new ArrayList<>();
        for (int round = 0; round < 20; round++) {
            for (int i = 0; i < 300; i++) {
                int size = random.nextInt(8) == 0 ? random.nextInt(300 << 10) : random.nextInt(5000);
                live.add(pool.allocate(ByteBufAllocator.DEFAULT, size, Integer.MAX_VALUE));
            }
            live.sort(Comparator.comparingLong(RegisteredByteBuf::memoryAddress));
            for (int i = 0; i < live.size(); i++) {
                RegisteredByteBuf buf = live.get(i);
                assertThat(registrar.covers(buf.lkey(), buf.memoryAddress(), buf.slotLength())).isTrue();
                if (i > 0) {
                    RegisteredByteBuf previous = live.get(i - 1);
                    assertThat(previous.memoryAddress() + previous.slotLength())
                            .as("slot after %s", previous).isLessThanOrEqualTo(buf.memoryAddress());
                }
            }
            long used = live.stream().mapToLong(RegisteredByteBuf::slotLength).sum();
            assertThat(pool.usedMemory()).isEqualTo(used);
            for (int i = live.size() - 1; i >= 0; i -= 2) {
                live.remove(i).release();
            }
        }
        live.forEach(RegisteredByteBuf::release);
        pool.trimCurrentThreadCache();
    }

    @Test
    void slotsAThreadCachesPinTheirChunksUntilTheCacheIsTrimmed() throws Exception {
        // 1 KiB slots: 1024 per 1 MiB chunk, 128 cached per thread. Four chunks' worth, then all released except
        // one slot per chunk, then those four: they stay in the loop thread's cache, one in each chunk.
        AtomicReference<Throwable> failure = new AtomicReference<>();
        int[] pinned = new int[1];
        long[] releasedBefore = new long[1];
        Thread loop = new FastThreadLocalThread(() -> {
            try {
                List<RegisteredByteBuf> bufs = new ArrayList<>();
                for (int i = 0; i < 4 * 1024; i++) {
                    bufs.add(pool.allocate(ByteBufAllocator.DEFAULT, 1024, 1024));
                }
                assertThat(pool.chunkCount()).isEqualTo(4);
                List<RegisteredByteBuf> lastOfEachChunk = new ArrayList<>();
                java.util.Set<Integer> chunksSeen = new java.util.HashSet<>(); // by lkey: one per chunk
                for (RegisteredByteBuf buf : bufs) {
                    if (chunksSeen.add(buf.lkey())) {
                        lastOfEachChunk.add(buf);
                    } else {
                        buf.release();
                    }
                }
                assertThat(lastOfEachChunk).hasSize(4);
                lastOfEachChunk.forEach(RegisteredByteBuf::release);
                assertThat(pool.usedMemory()).isZero();
                pinned[0] = pool.chunkCount();
                releasedBefore[0] = pool.releasedChunks();
                pool.trimCurrentThreadCache();
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        loop.start();
        loop.join();
        assertThat(failure.get()).isNull();
        assertThat(pinned[0]).as("chunks while the cache holds a slot of each").isEqualTo(4);
        assertThat(pool.chunkCount()).as("after the trim: maxEmptyChunks (1)").isEqualTo(1);
        assertThat(pool.releasedChunks() - releasedBefore[0]).as("chunks released by the trim").isEqualTo(3);
        assertThat(registrar.liveRegistrations()).isEqualTo(1);
    }

    @Test
    void emptyChunksBeyondMaxEmptyChunksAreReleasedAtOnce() {
        List<RegisteredByteBuf> bufs = new ArrayList<>();
        for (int i = 0; i < 3 * 4; i++) {
            bufs.add(pool.allocate(ByteBufAllocator.DEFAULT, 256 << 10, 256 << 10)); // 4 per chunk, not cached
        }
        assertThat(pool.chunkCount()).isEqualTo(3);
        bufs.forEach(RegisteredByteBuf::release);
        assertThat(pool.chunkCount()).isEqualTo(1);
        assertThat(pool.releasedChunks()).isEqualTo(2);
        assertThat(pool.registeredMemory()).isEqualTo(1 << 20);
        RegisteredByteBuf dedicated = pool.allocate(ByteBufAllocator.DEFAULT, 3 << 20, 3 << 20);
        assertThat(pool.chunkCount()).isEqualTo(2);
        dedicated.release();
        assertThat(pool.chunkCount()).isEqualTo(1);
        assertThat(pool.releasedChunks()).isEqualTo(3);
    }
}
