package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.MemorySegment;

/**
 * Base of the wrappers over verbs and rdma_cm objects. Tracks whether the native object still exists and which
 * objects depend on it, so that misuse (use after close, closing a PD under live MRs, destroying an id with an
 * un-acked event) is an exception instead of a crash or a hang.
 *
 * <p>Creating and closing objects is thread-safe (a memory pool may register chunks from any thread). The data
 * path of an object (posting, polling) belongs to one thread at a time, and an object must not be closed while
 * another thread is still using it.
 */
public abstract class NativeObject implements AutoCloseable {
    private final String kind;
    final MemorySegment pointer;
    private NativeObject[] parents;
    private int dependents;
    private volatile boolean closed;

    NativeObject(String kind, MemorySegment pointer, NativeObject... parents) {
        this.kind = kind;
        this.pointer = pointer;
        int attached = 0;
        try {
            for (; attached < parents.length; attached++) {
                if (parents[attached] != null) {
                    parents[attached].attach();
                }
            }
        } catch (RuntimeException e) {
            for (int i = 0; i < attached; i++) {
                if (parents[i] != null) {
                    parents[i].detach();
                }
            }
            throw e;
        }
        this.parents = parents;
    }

    /** The address of the native object. */
    public final long address() {
        return pointer.address();
    }

    public final boolean isOpen() {
        return !closed;
    }

    final void checkOpen() {
        if (closed) {
            throw new IllegalStateException(kind + " is closed");
        }
    }

    private synchronized void attach() {
        checkOpen();
        dependents++;
    }

    private synchronized void detach() {
        dependents--;
    }

    /** Moves the dependency on {@code from} to {@code to} (an rdma_cm id migrating to another channel). */
    final synchronized void reparent(NativeObject from, NativeObject to) {
        for (int i = 0; i < parents.length; i++) {
            if (parents[i] == from) {
                to.attach();
                from.detach();
                parents[i] = to;
                return;
            }
        }
        throw new IllegalArgumentException(kind + " does not depend on " + from.kind);
    }

    /**
     * Destroys the native object; idempotent. Fails while objects created from this one are still open. Does
     * nothing for objects this process does not own (see {@link #isBorrowed()}).
     */
    @Override
    public final void close() {
        NativeObject[] released;
        synchronized (this) {
            if (closed || isBorrowed()) {
                return;
            }
            if (dependents > 0) {
                throw new IllegalStateException(kind + " still has " + dependents
                        + " dependent object(s) open (created from it or waiting on it); close them first");
            }
            destroy();
            closed = true;
            released = parents;
            parents = new NativeObject[0];
        }
        for (NativeObject parent : released) {
            if (parent != null) {
                parent.detach();
            }
        }
    }

    /**
     * A borrowed object its library is about to free (a removed device's context): from now on every use is an
     * exception. Nothing is destroyed here.
     */
    final synchronized void retire() {
        if (isBorrowed()) {
            closed = true;
        }
    }

    /** Whether the native object belongs to a library (e.g. librdmacm's device contexts) and outlives us. */
    boolean isBorrowed() {
        return false;
    }

    /** Releases the native object. Called once, with no dependents left. */
    abstract void destroy();

    @Override
    public String toString() {
        return kind + "@0x" + Long.toHexString(pointer.address()) + (closed ? " (closed)" : "");
    }
}
