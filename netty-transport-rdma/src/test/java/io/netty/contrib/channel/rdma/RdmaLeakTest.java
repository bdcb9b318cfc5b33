package io.netty.contrib.channel.rdma;

import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.ResourceLeakDetector;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The transport under Netty's PARANOID leak detection leaks no buffer: framed echo of random sizes (receive
 * copies, buffers over the ring, in-place sends of received buffers, decoders that cumulate), a reader holding more
 * than a ring, streams of fresh buffers with their own promises (copied into SENDs and into ring writes),
 * connections closed by their port going down (where a port can be taken down), then close and shutdown. Runs in
 * its own JVM (the {@code leak-tests} execution), because the detector has to be chosen before the first buffer
 * class loads. A buffer leaked on purpose at the end proves the detector was watching.
 */
@Timeout(180)
class RdmaLeakTest {

    @Test
    void transportLeaksNothingUnderParanoidLeakDetection() throws Exception {
        assertThat(ResourceLeakDetector.getLevel()).isEqualTo(ResourceLeakDetector.Level.PARANOID);
        SoftwareRdma.use();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        try {
            RdmaRandomEchoTest.echoFrames(group, RdmaRandomEchoTest.randomSizes(60, 6 << 20, 21), 21);
            RdmaReceiveRingTest.holdMoreThanARing(group);
            // Fresh buffers with their own promises, copied into SENDs (64 B) and into ring writes (1 KiB).
            RdmaFreshBufferStreamTest.stream(group, 64, 20_000);
            RdmaFreshBufferStreamTest.stream(group, 1024, 20_000);
            if (PortSwitch.available()) {
                RdmaPortEventsTest.portDownUnderLoad(group);
            }
            leakOnPurpose();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        collectLeaks();
        assertThat(RecordingLeakDetector.LEAKS).as("leaks reported").hasSize(1);
        assertThat(RecordingLeakDetector.LEAKS.getFirst()).as("the only leak").contains(CANARY);
    }

    private static final String CANARY = "leaked on purpose by RdmaLeakTest";

    private static void leakOnPurpose() {
        RdmaDevices.defaultAllocator().directBuffer(64).writeLong(1).touch(CANARY);
    }

    /**
     * Leaks are reported when a later tracked allocation finds a collected, unreleased buffer: collect until the
     * canary shows up (everything unreleased before it is collectable as well), then a few rounds more.
     */
    private static void collectLeaks() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        int extraRounds = 5;
        while (System.nanoTime() < deadline && extraRounds > 0) {
            if (RecordingLeakDetector.LEAKS.stream().anyMatch(leak -> leak.contains(CANARY))) {
                extraRounds--;
            }
            System.gc();
            Thread.sleep(10);
            UnpooledByteBufAllocator.DEFAULT.directBuffer(1).release(); // tracked: the detector looks now
        }
    }
}
