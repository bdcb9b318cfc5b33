package io.netty.contrib.channel.rdma;

import io.netty.util.internal.logging.InternalLoggerFactory;
import io.netty.util.internal.logging.JdkLoggerFactory;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * What Netty and the transport log at WARN and above while it is open, as the lines a console would show (the
 * message, then the stack trace of its throwable). The module's tests have no logging backend, so Netty logs
 * through java.util.logging; this handler sits on the {@code io.netty} logger, the parent of every Netty logger.
 */
final class CapturedLog implements AutoCloseable {
    /** Held: java.util.logging keeps its loggers only weakly, and a collected one loses its handlers. */
    private final Logger netty = Logger.getLogger("io.netty");
    private final List<LogRecord> records = new ArrayList<>();
    private final Handler handler = new Handler() {
        @Override
        public void publish(LogRecord record) {
            if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
                synchronized (records) {
                    records.add(record);
                }
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    /** Whether Netty logs through java.util.logging in this JVM, so that its lines can be captured. */
    static boolean available() {
        return InternalLoggerFactory.getDefaultFactory() instanceof JdkLoggerFactory;
    }

    CapturedLog() {
        if (!(InternalLoggerFactory.getDefaultFactory() instanceof JdkLoggerFactory)) {
            throw new IllegalStateException("Netty does not log through java.util.logging here: "
                    + InternalLoggerFactory.getDefaultFactory());
        }
        netty.addHandler(handler);
    }

    /** What was logged, in order. */
    List<Entry> entries() {
        List<Entry> out = new ArrayList<>();
        synchronized (records) {
            for (LogRecord r : records) {
                out.add(new Entry(r.getLoggerName() + ": " + r.getMessage(), r.getThrown()));
            }
        }
        return out;
    }

    /** One record: its logger's name and its message (a JDK logger's message is formatted already). */
    record Entry(String message, Throwable thrown) {
        /** The lines a console shows for it: its message's, and its throwable's stack trace. */
        int lines() {
            StringWriter text = new StringWriter();
            text.append(message).append('\n');
            if (thrown != null) {
                thrown.printStackTrace(new PrintWriter(text));
            }
            return (int) text.toString().lines().count();
        }

        @Override
        public String toString() {
            return thrown == null ? message : message + " [" + thrown + "]";
        }
    }

    @Override
    public void close() {
        netty.removeHandler(handler);
    }
}
