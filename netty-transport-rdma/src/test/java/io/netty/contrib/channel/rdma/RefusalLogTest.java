package io.netty.contrib.channel.rdma;

import io.netty.util.internal.logging.AbstractInternalLogger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

class RefusalLogTest {
    private static final long INTERVAL = TimeUnit.MILLISECONDS.toNanos(300);
    private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();

    @AfterEach
    void stop() {
        scheduler.shutdownNow();
    }

    @Test
    void aFloodIsItsFirstLineAndThenItsCount() throws Exception {
        List<String> lines = new ArrayList<>();
        RefusalLog log = new RefusalLog(new Recording(lines, false), "server", INTERVAL, scheduler);
        for (int i = 0; i < 1000; i++) {
            log.log(RefusalLog.Kind.REFUSED, "refused " + i, null);
        }
        assertThat(lines).containsExactly("server: refused 0");
        awaitLines(lines, 2);
        assertThat(lines.get(1)).isEqualTo("server: connection requests refused: 999 more in the last 300 ms (not "
                + "logged one by one)");
        // A flood that goes on: counted from the last count line, one line per interval.
        log.log(RefusalLog.Kind.REFUSED, "refused again", null);
        log.log(RefusalLog.Kind.REFUSED, "and again", null);
        awaitLines(lines, 3);
        assertThat(lines.get(2)).startsWith("server: connection requests refused: 2 more in the last");
        // After a quiet interval, the next one is logged as it is.
        Thread.sleep(TimeUnit.NANOSECONDS.toMillis(INTERVAL) + 100);
        log.log(RefusalLog.Kind.REFUSED, "refused later", null);
        assertThat(lines).hasSize(4).last().isEqualTo("server: refused later");
        Thread.sleep(TimeUnit.NANOSECONDS.toMillis(INTERVAL) + 100);
        assertThat(lines).as("no count line when nothing was counted").hasSize(4);
    }

    @Test
    void eachKindHasItsOwnInterval() throws Exception {
        List<String> lines = new ArrayList<>();
        RefusalLog log = new RefusalLog(new Recording(lines, false), "server", INTERVAL, scheduler);
        for (int i = 0; i < 10; i++) {
            log.log(RefusalLog.Kind.TIMED_OUT, "timed out " + i, null);
            log.log(RefusalLog.Kind.ACCEPT_FAILED, "accept failed " + i, null);
        }
        // A flood of one kind does not hide the first of another.
        log.log(RefusalLog.Kind.REFUSED, "refused", null);
        assertThat(lines).containsExactly("server: timed out 0", "server: accept failed 0", "server: refused");
        awaitLines(lines, 5);
        assertThat(lines.subList(3, 5)).containsExactlyInAnyOrder(
                "server: handshakes not established in time: 9 more in the last 300 ms (not logged one by one)",
                "server: accepts failed: 9 more in the last 300 ms (not logged one by one)");
    }

    @Test
    void aStackTraceOnlyWithDebugLogging() {
        Exception cause = new IllegalStateException("rdma_accept failed: EINVAL");
        List<String> quiet = new ArrayList<>();
        new RefusalLog(new Recording(quiet, false), "server", INTERVAL, scheduler)
                .log(RefusalLog.Kind.ACCEPT_FAILED, "could not accept it", cause);
        assertThat(quiet).containsExactly("server: could not accept it");

        List<String> debug = new ArrayList<>();
        RefusalLog log = new RefusalLog(new Recording(debug, true), "server", INTERVAL, scheduler);
        log.log(RefusalLog.Kind.ACCEPT_FAILED, "could not accept it", cause);
        log.log(RefusalLog.Kind.ACCEPT_FAILED, "could not accept the next", cause);
        // With debug on, the warning carries the stack trace, and the ones counted are logged at debug level.
        assertThat(debug).containsExactly("WARN server: could not accept it + " + cause,
                "DEBUG server: could not accept the next + " + cause);
    }

    @Test
    void anIntervalOfZeroLogsEveryOne() {
        List<String> lines = new ArrayList<>();
        RefusalLog log = new RefusalLog(new Recording(lines, false), "server", 0, scheduler);
        for (int i = 0; i < 3; i++) {
            log.log(RefusalLog.Kind.FAILED, "failed " + i, null);
        }
        assertThat(lines).containsExactly("server: failed 0", "server: failed 1", "server: failed 2");
    }

    private static void awaitLines(List<String> lines, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (size(lines) < n && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(size(lines)).as("lines: %s", lines).isEqualTo(n);
    }

    private static int size(List<String> lines) {
        synchronized (lines) {
            return lines.size();
        }
    }

    /**
     * Keeps the warnings, formatted; with {@code debug}, also debug lines, and each line says its level and
     * throwable.
     */
    private static final class Recording extends AbstractInternalLogger {
        private static final long serialVersionUID = 1L;
        private final transient List<String> lines;
        private final boolean debug;

        Recording(List<String> lines, boolean debug) {
            super("recording");
            this.lines = lines;
            this.debug = debug;
        }

        private void add(String level, String msg, Throwable t) {
            synchronized (lines) {
                lines.add(debug ? level + " " + msg + " + " + t : msg);
            }
        }

        private static String format(String format, Object... args) {
            String s = format;
            for (Object a : args) {
                s = s.replaceFirst("\\{}", java.util.regex.Matcher.quoteReplacement(String.valueOf(a)));
            }
            return s;
        }

        @Override
        public void warn(String msg) {
            add("WARN", msg, null);
        }

        @Override
        public void warn(String format, Object arg1, Object arg2) {
            add("WARN", format(format, arg1, arg2), null);
        }

        @Override public boolean isTraceEnabled() { return false; }
        @Override public void trace(String msg) { }
        @Override public void trace(String format, Object arg) { }
        @Override public void trace(String format, Object argA, Object argB) { }
        @Override public void trace(String format, Object... arguments) { }
        @Override public void trace(String msg, Throwable t) { }
        @Override public boolean isDebugEnabled() { return debug; }
        @Override public void debug(String msg) { add("DEBUG", msg, null); }
        @Override public void debug(String format, Object arg) { add("DEBUG", format(format, arg), null); }
        @Override public void debug(String format, Object argA, Object argB) { add("DEBUG", format(format, argA, argB), null); }
        @Override public void debug(String format, Object... arguments) { add("DEBUG", format(format, arguments), null); }
        @Override public void debug(String msg, Throwable t) { add("DEBUG", msg, t); }
        @Override public boolean isInfoEnabled() { return false; }
        @Override public void info(String msg) { }
        @Override public void info(String format, Object arg) { }
        @Override public void info(String format, Object argA, Object argB) { }
        @Override public void info(String format, Object... arguments) { }
        @Override public void info(String msg, Throwable t) { }
        @Override public boolean isWarnEnabled() { return true; }
        @Override public void warn(String format, Object arg) { add("WARN", format(format, arg), null); }
        @Override public void warn(String format, Object... arguments) { add("WARN", format(format, arguments), null); }
        @Override public void warn(String msg, Throwable t) { add("WARN", msg, t); }
        @Override public boolean isErrorEnabled() { return false; }
        @Override public void error(String msg) { }
        @Override public void error(String format, Object arg) { }
        @Override public void error(String format, Object argA, Object argB) { }
        @Override public void error(String format, Object... arguments) { }
        @Override public void error(String msg, Throwable t) { }
    }
}
