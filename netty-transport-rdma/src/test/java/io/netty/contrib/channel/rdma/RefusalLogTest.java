package io.netty.contrib.channel.rdma;

import io.netty.util.internal.logging.AbstractInternalLogger;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

class RefusalLogTest {
    @Test
    void aFloodOfRefusalsIsOneLinePerIntervalWithACount() throws Exception {
        List<String> lines = new ArrayList<>();
        RefusalLog log = new RefusalLog(new Recording(lines), TimeUnit.MILLISECONDS.toNanos(200));
        for (int i = 0; i < 1000; i++) {
            log.refused("refused " + i);
        }
        assertThat(lines).containsExactly("refused 0");
        Thread.sleep(250);
        log.refused("refused again");
        assertThat(lines).hasSize(2);
        assertThat(lines.get(1)).isEqualTo("refused again (999 more refused since the last report, not logged)");
    }

    /** Keeps the warnings, formatted. */
    private static final class Recording extends AbstractInternalLogger {
        private static final long serialVersionUID = 1L;
        private final transient List<String> lines;

        Recording(List<String> lines) {
            super("recording");
            this.lines = lines;
        }

        @Override
        public void warn(String msg) {
            lines.add(msg);
        }

        @Override
        public void warn(String format, Object arg1, Object arg2) {
            lines.add(format.replaceFirst("\\{}", String.valueOf(arg1)).replaceFirst("\\{}", String.valueOf(arg2)));
        }

        @Override public boolean isTraceEnabled() { return false; }
        @Override public void trace(String msg) { }
        @Override public void trace(String format, Object arg) { }
        @Override public void trace(String format, Object argA, Object argB) { }
        @Override public void trace(String format, Object... arguments) { }
        @Override public void trace(String msg, Throwable t) { }
        @Override public boolean isDebugEnabled() { return false; }
        @Override public void debug(String msg) { }
        @Override public void debug(String format, Object arg) { }
        @Override public void debug(String format, Object argA, Object argB) { }
        @Override public void debug(String format, Object... arguments) { }
        @Override public void debug(String msg, Throwable t) { }
        @Override public boolean isInfoEnabled() { return false; }
        @Override public void info(String msg) { }
        @Override public void info(String format, Object arg) { }
        @Override public void info(String format, Object argA, Object argB) { }
        @Override public void info(String format, Object... arguments) { }
        @Override public void info(String msg, Throwable t) { }
        @Override public boolean isWarnEnabled() { return true; }
        @Override public void warn(String format, Object arg) { lines.add(format.replaceFirst("\\{}", String.valueOf(arg))); }
        @Override public void warn(String format, Object... arguments) { lines.add(format); }
        @Override public void warn(String msg, Throwable t) { lines.add(msg); }
        @Override public boolean isErrorEnabled() { return false; }
        @Override public void error(String msg) { }
        @Override public void error(String format, Object arg) { }
        @Override public void error(String format, Object argA, Object argB) { }
        @Override public void error(String format, Object... arguments) { }
        @Override public void error(String msg, Throwable t) { }
    }
}
