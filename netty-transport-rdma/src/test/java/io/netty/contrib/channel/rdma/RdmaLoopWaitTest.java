package io.netty.contrib.channel.rdma;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.Locale;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * How the default (adaptive) loop waits: it keeps polling while completions come (an echo between two loops of
 * this JVM never makes either sleep) and blocks when nothing comes (an idle loop uses next to no CPU). Counted, not
 * timed: voluntary context switches of the loop threads (each is a blocking wait) per echo, and CPU time against
 * wall time while idle.
 *
 * <p>The first build slept twice per echo (once in each loop): the spin compared {@code System.nanoTime()} with
 * {@code IoHandlerContext.deadlineNanos()}, which counts from the executor's ticker, so it always looked past due.
 */
@Timeout(120)
class RdmaLoopWaitTest {
    private static final int WARMUP = 20_000;
    private static final int ECHOES = 20_000;

    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
    }

    @Test
    void adaptiveLoopsDoNotSleepUnderContinuousTraffic() throws Exception {
        try (EchoLoops loops = new EchoLoops(new RdmaIoHandlerConfig(), 64)) {
            loops.pingPong.run(WARMUP);
            long before = loops.sleeps();
            loops.pingPong.run(ECHOES);
            double perEcho = (double) (loops.sleeps() - before) / ECHOES;
            System.out.printf(Locale.ROOT, "adaptive loops under continuous echo: %.4f sleeps per echo%n", perEcho);
            // Both loops blocking every time would be 2; a rare one (a GC, a stall of this machine) is allowed.
            assertThat(perEcho).as("loop sleeps per echo").isLessThan(0.05);
        }
    }

    @Test
    void idleAdaptiveLoopsBlock() throws Exception {
        try (EchoLoops loops = new EchoLoops(new RdmaIoHandlerConfig(), 64)) {
            loops.pingPong.run(1_000);
            long cpu = loops.cpuNanos();
            long start = System.nanoTime();
            Thread.sleep(1_000);
            double share = (double) (loops.cpuNanos() - cpu) / (System.nanoTime() - start) / 2;
            System.out.printf(Locale.ROOT, "idle adaptive loops: %.3f %% of a core each%n", share * 100);
            assertThat(share).as("share of a core an idle loop uses").isLessThan(0.05);
        }
    }

    @Test
    void spinningLoopsNeverSleep() throws Exception {
        try (EchoLoops loops = new EchoLoops(RdmaIoHandlerConfig.spinning(), 64)) {
            loops.pingPong.run(WARMUP);
            long before = loops.sleeps();
            loops.pingPong.run(ECHOES);
            long sleeps = loops.sleeps() - before;
            assertThat((double) sleeps / ECHOES).as("loop sleeps per echo, busy-polling").isLessThan(0.05);
        }
    }
}
