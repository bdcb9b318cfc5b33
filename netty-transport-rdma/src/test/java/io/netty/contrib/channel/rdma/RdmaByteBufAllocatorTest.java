package io.netty.contrib.channel.rdma;

import io.netty.buffer.AbstractByteBuf;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.contrib.channel.rdma.internal.memory.FakeRegistrar;
import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrationException;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredBuffer;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.concurrent.FastThreadLocalThread;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.SplittableRandom;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static io.netty.contrib.channel.rdma.internal.memory.RegisteredBuffer.NOT_REGISTERED;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

@Timeout(120)
class RdmaByteBufAllocatorTest {
    private static final int KiB = 1024;
    private static final int MiB = 1024 * 1024;

    private final FakeRegistrar registrar = new FakeRegistrar();
    private final RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(registrar);

    @AfterEach
    void closeAllocator() {
        alloc.close();
        assertThat(registrar.liveRegistrations()).isZero();
    }

    @Test
    void everySizeFrom0BTo16MiBIsRegisteredAndHoldsWhatIsWritten() {
        int[] sizes = { 0, 1, 7, 63, 64, 65, 100, 127, 128, 1000, 4 * KiB - 1, 4 * KiB, 4 * KiB + 1, 32 * KiB,
                64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 300 * KiB, MiB - 1, MiB, MiB + 1, 2 * MiB, 4 * MiB,
                5 * MiB + 3, 16 * MiB };
        for (int size : sizes) {
            ByteBuf buf = alloc.directBuffer(size);
            assertThat(buf.capacity()).as("capacity of %d", size).isEqualTo(size);
            assertThat(buf.isDirect()).isTrue();
            assertRegistered(buf);
            fill(buf, size, size);
            assertThat(buf.writerIndex()).isEqualTo(size);
            assertContent(buf, 0, size, size);
            assertThat(alloc.metric().usedDirectMemory()).isGreaterThanOrEqualTo(size);
            assertThat(buf.release()).isTrue();
        }
        assertThat(alloc.metric().usedDirectMemory()).isZero();
    }

    @Test
    void primitivesRoundTripInBothByteOrders() {
        ByteBuf buf = alloc.directBuffer(64);
        buf.writeByte(0x81).writeShort(0x8283).writeShortLE(0x8485).writeMedium(0x868788).writeMediumLE(0x898a8b)
           .writeInt(0x8c8d8e8f).writeIntLE(0x90919293).writeLong(0x9495969798999a9bL)
           .writeLongLE(0x9c9d9e9fa0a1a2a3L).writeFloat(1.5f).writeDouble(-2.25).writeChar('x');
        assertThat(buf.readUnsignedByte()).isEqualTo((short) 0x81);
        assertThat(buf.readUnsignedShort()).isEqualTo(0x8283);
        assertThat(buf.readUnsignedShortLE()).isEqualTo(0x8485);
        assertThat(buf.readUnsignedMedium()).isEqualTo(0x868788);
        assertThat(buf.readUnsignedMediumLE()).isEqualTo(0x898a8b);
        assertThat(buf.readInt()).isEqualTo(0x8c8d8e8f);
        assertThat(buf.readIntLE()).isEqualTo(0x90919293);
        assertThat(buf.readLong()).isEqualTo(0x9495969798999a9bL);
        assertThat(buf.readLongLE()).isEqualTo(0x9c9d9e9fa0a1a2a3L);
        assertThat(buf.readFloat()).isEqualTo(1.5f);
        assertThat(buf.readDouble()).isEqualTo(-2.25);
        assertThat(buf.readChar()).isEqualTo('x');
        assertThat(buf.getByte(1)).isEqualTo((byte) 0x82); // big-endian by default
        assertThat(buf.getByte(3)).isEqualTo((byte) 0x85); // little-endian where asked
        buf.release();
    }

    @Test
    void growthKeepsContentAndStaysInRegisteredMemory() {
        ByteBuf buf = alloc.directBuffer(10);
        byte[] block = new byte[997];
        int written = 0;
        while (written < 3 * MiB) { // through slabs, page runs, and a dedicated chunk above 1 MiB
            for (int i = 0; i < block.length; i++) {
                block[i] = (byte) (written + i);
            }
            buf.writeBytes(block);
            written += block.length;
            assertRegistered(buf);
        }
        assertThat(buf.capacity()).isGreaterThanOrEqualTo(written);
        for (int i = 0; i < written; i += 4099) {
            assertThat(buf.getByte(i)).isEqualTo((byte) i);
        }
        buf.capacity(100); // shrinking far moves it into a small slot
        assertRegistered(buf);
        assertThat(buf.writerIndex()).isEqualTo(100);
        for (int i = 0; i < 100; i++) {
            assertThat(buf.getByte(i)).isEqualTo((byte) i);
        }
        buf.release();
        assertThat(alloc.metric().usedDirectMemory()).isZero();
    }

    @Test
    void lkeyIsFoundThroughSlicesDuplicatesAndWrappers() {
        ByteBuf buf = alloc.directBuffer(256).writeZero(256);
        long lkey = RegisteredBuffer.lkey(buf, alloc.pool());
        assertThat(lkey).isNotEqualTo(NOT_REGISTERED);
        long address = buf.memoryAddress();

        ByteBuf slice = buf.slice(10, 100);
        assertThat(RegisteredBuffer.lkey(slice, alloc.pool())).isEqualTo(lkey);
        assertThat(slice.memoryAddress()).isEqualTo(address + 10);
        ByteBuf nested = slice.retainedSlice(5, 20);
        assertThat(RegisteredBuffer.lkey(nested, alloc.pool())).isEqualTo(lkey);
        assertThat(nested.memoryAddress()).isEqualTo(address + 15);
        nested.release();
        assertThat(RegisteredBuffer.lkey(buf.duplicate(), alloc.pool())).isEqualTo(lkey);
        assertThat(RegisteredBuffer.lkey(buf.asReadOnly(), alloc.pool())).isEqualTo(lkey);
        assertThat(RegisteredBuffer.lkey(Unpooled.wrappedBuffer(buf.retain()), alloc.pool())).isEqualTo(lkey);
        buf.release();

        ResourceLeakDetector.Level level = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        try {
            ByteBuf tracked = alloc.directBuffer(64);
            assertThat(tracked.unwrap()).as("a leak-detection wrapper").isNotNull();
            assertThat(RegisteredBuffer.lkey(tracked, alloc.pool())).isNotEqualTo(NOT_REGISTERED);
            assertThat(RegisteredBuffer.lkey(tracked.slice(1, 2), alloc.pool())).isNotEqualTo(NOT_REGISTERED);
            tracked.release();
        } finally {
            ResourceLeakDetector.setLevel(level);
        }
        buf.release();
    }

    @Test
    void foreignBuffersAreNotRegistered() {
        ByteBuf pooled = PooledByteBufAllocator.DEFAULT.directBuffer(64);
        ByteBuf heap = alloc.heapBuffer(64);
        CompositeByteBuf composite = alloc.compositeDirectBuffer().addComponents(true,
                alloc.directBuffer(8).writeLong(1), alloc.directBuffer(8).writeLong(2));
        try (RdmaByteBufAllocator other = new RdmaByteBufAllocator(new FakeRegistrar())) {
            ByteBuf otherBuf = other.directBuffer(64);
            assertThat(RegisteredBuffer.lkey(otherBuf, alloc.pool()))
                    .as("another pool may be another protection domain").isEqualTo(NOT_REGISTERED);
            otherBuf.release();
        }
        assertThat(RegisteredBuffer.lkey(pooled, alloc.pool())).isEqualTo(NOT_REGISTERED);
        assertThat(RegisteredBuffer.lkey(heap, alloc.pool())).isEqualTo(NOT_REGISTERED);
        assertThat(RegisteredBuffer.lkey(composite, alloc.pool())).isEqualTo(NOT_REGISTERED);
        assertThat(RegisteredBuffer.lkey(Unpooled.EMPTY_BUFFER, alloc.pool())).isEqualTo(NOT_REGISTERED);
        assertThat(composite.readLong()).isEqualTo(1);
        assertThat(composite.readLong()).isEqualTo(2);
        pooled.release();
        heap.release();
        composite.release();
        assertThat(alloc.metric().usedDirectMemory()).isZero();
    }

    @Test
    void heapDirectAndIoBuffersAreWhatTheirNamesSay() {
        ByteBuf heap = alloc.heapBuffer(16);
        ByteBuf buffer = alloc.buffer(16);
        ByteBuf io = alloc.ioBuffer(16);
        assertThat(heap.isDirect()).isFalse();
        assertThat(heap.hasArray()).isTrue();
        assertThat(heap.alloc()).isSameAs(alloc);
        assertThat(buffer.isDirect()).isTrue();
        assertThat(io.isDirect()).isTrue();
        assertThat(buffer.alloc()).isSameAs(alloc);
        assertThat(alloc.isDirectBufferPooled()).isTrue();
        assertThat(alloc.directBuffer(0, 0).capacity()).isZero();
        heap.release();
        buffer.release();
        io.release();
    }

    @Test
    void releasedMemoryIsReusedWithoutNewRegistrations() {
        ByteBuf warm = alloc.directBuffer(64);
        warm.release();
        int registrations = registrar.registrations();
        SplittableRandom random = new SplittableRandom(1);
        for (int i = 0; i < 10_000; i++) {
            ByteBuf buf = alloc.directBuffer(random.nextInt(MiB + 1));
            buf.writeByte(i);
            buf.release();
        }
        assertThat(registrar.registrations()).isEqualTo(registrations);
        assertThat(alloc.metric().usedDirectMemory()).isZero();
        assertThat(alloc.metric().chunkCount()).isEqualTo(1);
    }

    @Test
    void chunksAreRegisteredPerChunkNotPerBuffer() {
        List<ByteBuf> bufs = new ArrayList<>();
        for (int i = 0; i < 4000; i++) { // 4000 KiB: fits one 4 MiB chunk
            bufs.add(alloc.directBuffer(KiB));
        }
        assertThat(registrar.registrations()).isEqualTo(1);
        assertThat(alloc.metric().registeredMemory()).isEqualTo(RdmaByteBufAllocator.DEFAULT_CHUNK_SIZE);
        long chunkStart = registrar.live().values().iterator().next().address();
        assertThat(chunkStart % (2 * MiB)).as("2 MiB-aligned for huge pages").isZero();
        bufs.forEach(ByteBuf::release);
    }

    @Test
    void emptyChunksBeyondTheRetentionLimitAreDeregistered() {
        List<ByteBuf> bufs = new ArrayList<>();
        for (int i = 0; i < 40; i++) { // 10 chunks of runs
            bufs.add(alloc.directBuffer(MiB));
        }
        assertThat(registrar.liveRegistrations()).isEqualTo(10);
        bufs.forEach(ByteBuf::release);
        assertThat(registrar.liveRegistrations()).isEqualTo(RdmaByteBufAllocator.DEFAULT_MAX_EMPTY_CHUNKS);
        assertThat(alloc.metric().chunkCount()).isEqualTo(RdmaByteBufAllocator.DEFAULT_MAX_EMPTY_CHUNKS);

        ByteBuf big = alloc.directBuffer(8 * MiB);
        assertThat(alloc.metric().chunkCount()).isEqualTo(RdmaByteBufAllocator.DEFAULT_MAX_EMPTY_CHUNKS + 1);
        big.release();
        assertThat(alloc.metric().chunkCount()).as("a dedicated chunk goes with its buffer")
                                              .isEqualTo(RdmaByteBufAllocator.DEFAULT_MAX_EMPTY_CHUNKS);
    }

    @Test
    void eventLoopThreadsCacheAndFlushWhenTheyEnd() throws Exception {
        int registrations;
        try (RdmaByteBufAllocator small = new RdmaByteBufAllocator(registrar, 64 * KiB, 64 * KiB, 0)) {
            runOnEventLoopThread(() -> {
                for (int i = 0; i < 1000; i++) {
                    small.directBuffer(100).release();
                }
                assertThat(small.metric().chunkCount()).as("cached slots keep the chunk").isEqualTo(1);
                small.trimCurrentThreadCache();
                assertThat(small.metric().chunkCount()).as("no empty chunk is retained").isZero();
                small.directBuffer(100).release();
            });
            registrations = registrar.registrations();
            assertThat(small.metric().chunkCount()).as("flushed when the thread ended").isZero();
            assertThat(registrations).isEqualTo(2);
        }
    }

    @Test
    void buffersMayBeReleasedOnAnotherThread() throws Exception {
        BlockingQueue<ByteBuf> handOff = new ArrayBlockingQueue<>(64);
        int count = 20_000;
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread producer = new FastThreadLocalThread(() -> {
            SplittableRandom random = new SplittableRandom(2);
            try {
                for (int i = 0; i < count; i++) {
                    int size = random.nextInt(1, 70 * KiB);
                    ByteBuf buf = alloc.directBuffer(size);
                    fill(buf, size, i);
                    handOff.put(buf);
                }
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        Thread consumer = new Thread(() -> {
            try {
                for (int i = 0; i < count; i++) {
                    ByteBuf buf = handOff.take();
                    assertContent(buf, 0, buf.writerIndex(), i);
                    buf.release();
                }
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        producer.start();
        consumer.start();
        producer.join();
        consumer.join();
        assertThat(failure.get()).isNull();
        assertThat(alloc.metric().usedDirectMemory()).isZero();
        assertThat(registrar.liveRegistrations()).isLessThanOrEqualTo(RdmaByteBufAllocator.DEFAULT_MAX_EMPTY_CHUNKS);
    }

    @Test
    void fourThreadsAllocateConcurrentlyWithoutSharingMemory() throws Exception {
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        Queue<Throwable> failures = new ConcurrentLinkedQueue<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            Runnable work = () -> {
                SplittableRandom random = new SplittableRandom(id);
                List<ByteBuf> held = new ArrayList<>();
                try {
                    start.await();
                    for (int i = 0; i < 20_000; i++) {
                        // Mostly slab sizes, some page runs, a few dedicated chunks.
                        int size = random.nextInt(100) == 0 ? random.nextInt(1, 2 * MiB)
                                : random.nextInt(10) == 0 ? random.nextInt(1, 256 * KiB) : random.nextInt(1, 4 * KiB);
                        ByteBuf buf = alloc.directBuffer(size);
                        fill(buf, size, id * 31 + i);
                        held.add(buf);
                        if (held.size() > 50) {
                            ByteBuf old = held.remove(random.nextInt(held.size()));
                            assertContent(old, 0, old.writerIndex(), old.getByte(0) & 0xff);
                            old.release();
                        }
                    }
                    for (ByteBuf buf : held) {
                        assertContent(buf, 0, buf.writerIndex(), buf.getByte(0) & 0xff);
                        buf.release();
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            };
            // Half are event-loop-like threads with caches, half share the locked pool.
            workers.add(id % 2 == 0 ? new FastThreadLocalThread(work) : new Thread(work));
        }
        workers.forEach(Thread::start);
        start.countDown();
        for (Thread worker : workers) {
            worker.join();
        }
        assertThat(failures).isEmpty();
        assertThat(alloc.metric().usedDirectMemory()).isZero();
    }

    @Test
    void leakDetectionReportsLeakedBuffersOnly() throws Exception {
        ResourceLeakDetector.Level level = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        Queue<String> leaks = new ConcurrentLinkedQueue<>();
        ResourceLeakDetector<?> detector = byteBufLeakDetector();
        detector.setLeakListener((type, records) -> leaks.add(records));
        try {
            releaseOne();
            leakOne();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (leaks.stream().noneMatch(r -> r.contains("leakOne")) && System.nanoTime() < deadline) {
                System.gc();
                Thread.sleep(10);
                alloc.directBuffer(1).release(); // leaks are reported when the next buffer is tracked
            }
            assertThat(leaks).anyMatch(records -> records.contains("leakOne"));
            assertThat(leaks).noneMatch(records -> records.contains("releaseOne"));
        } finally {
            detector.setLeakListener(null);
            ResourceLeakDetector.setLevel(level);
        }
    }

    private void leakOne() {
        alloc.directBuffer(128).writeLong(42);
    }

    private void releaseOne() {
        alloc.directBuffer(128).writeLong(42).release();
    }

    private static ResourceLeakDetector<?> byteBufLeakDetector() throws ReflectiveOperationException {
        // Netty keeps the ByteBuf leak detector package-private; a listener is how its reports can be observed.
        Field field = AbstractByteBuf.class.getDeclaredField("leakDetector");
        field.setAccessible(true);
        return (ResourceLeakDetector<?>) field.get(null);
    }

    @Test
    void registrationFailureNamesTheLockedMemoryLimit() {
        registrar.failWith(() -> new IllegalStateException("ibv_reg_mr failed: Cannot allocate memory (ENOMEM)"));
        assertThatThrownBy(() -> alloc.directBuffer(100))
                .isInstanceOf(MemoryRegistrationException.class)
                .hasMessageStartingWith("memory registration of 4 MiB failed")
                .hasMessageContaining("RLIMIT_MEMLOCK ")
                .hasMessageContaining("ENOMEM");
        assertThatThrownBy(() -> alloc.directBuffer(3 * MiB))
                .isInstanceOf(MemoryRegistrationException.class)
                .hasMessageStartingWith("memory registration of 4 MiB failed");
        assertThat(alloc.metric().chunkCount()).isZero();
        assertThat(alloc.metric().usedDirectMemory()).isZero();

        registrar.failWith(null);
        ByteBuf buf = alloc.directBuffer(100);
        assertRegistered(buf);
        buf.release();
    }

    @Test
    void closeDeregistersEverythingAndRefusesFurtherUse() {
        ByteBuf small = alloc.directBuffer(100).writeInt(1);
        ByteBuf big = alloc.directBuffer(3 * MiB).writeInt(2);
        assertThat(registrar.liveRegistrations()).isEqualTo(2);
        alloc.close();
        assertThat(registrar.liveRegistrations()).isZero();
        assertThat(registrar.deregistrations()).isEqualTo(2);
        assertThat(alloc.metric().chunkCount()).isZero();
        assertThat(alloc.metric().registeredMemory()).isZero();
        assertThatThrownBy(() -> alloc.directBuffer(1)).isInstanceOf(IllegalStateException.class)
                                                       .hasMessageContaining("closed");
        assertThatThrownBy(() -> alloc.heapBuffer(1)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> small.getInt(0)).as("freed memory is never touched")
                                                 .isInstanceOf(IllegalStateException.class);
        assertThat(small.release()).isTrue();
        assertThat(big.release()).isTrue();
        alloc.close();
        assertThat(registrar.deregistrations()).isEqualTo(2);
    }

    @Test
    void optionsAreValidated() {
        assertThatThrownBy(() -> new RdmaByteBufAllocator(null)).hasMessageContaining("registrar");
        assertThatThrownBy(() -> new RdmaByteBufAllocator(registrar, 0, MiB, 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("chunkSize");
        assertThatThrownBy(() -> new RdmaByteBufAllocator(registrar, 3 * MiB, MiB, 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("chunkSize: 3145728");
        assertThatThrownBy(() -> new RdmaByteBufAllocator(registrar, 4 * MiB, 8 * MiB, 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxPooledCapacity");
        assertThatThrownBy(() -> new RdmaByteBufAllocator(registrar, 4 * MiB, MiB, -1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxEmptyChunks");
    }

    private void assertRegistered(ByteBuf buf) {
        long lkey = RegisteredBuffer.lkey(buf, alloc.pool());
        assertThat(lkey).isNotEqualTo(NOT_REGISTERED);
        assertThat(registrar.covers((int) lkey, buf.memoryAddress(), buf.capacity()))
                .as("%d bytes inside registration %d", buf.capacity(), lkey).isTrue();
    }

    /** Writes {@code length} bytes of a pattern that depends on {@code seed}, starting with the seed's low byte. */
    private static void fill(ByteBuf buf, int length, int seed) {
        for (int i = 0; i < length; i++) {
            buf.writeByte(seed + i * 7);
        }
    }

    private static void assertContent(ByteBuf buf, int from, int length, int seed) {
        for (int i = from; i < from + length; i++) {
            if (buf.getByte(i) != (byte) (seed + i * 7)) {
                throw new AssertionError("byte " + i + " of " + length + ": " + buf.getByte(i) + " != "
                        + (byte) (seed + i * 7));
            }
        }
    }

    private static void runOnEventLoopThread(Runnable task) throws InterruptedException {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread thread = new FastThreadLocalThread(() -> {
            try {
                task.run();
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        thread.start();
        thread.join();
        assertThat(failure.get()).isNull();
    }
}
