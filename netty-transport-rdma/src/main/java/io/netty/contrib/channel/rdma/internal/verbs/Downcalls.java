package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Creates downcall handles. A symbol the loaded library lacks (or a library that did not load) yields a handle
 * of the same type that throws {@link UnsupportedOperationException}, so class initialisation never fails; the
 * missing names are recorded for {@link VerbsAvailability}.
 */
final class Downcalls {
    static final Linker LINKER = Linker.nativeLinker();
    private static final List<String> MISSING_REQUIRED = new CopyOnWriteArrayList<>();

    private Downcalls() {
    }

    /** A handle for {@code name} in {@code lookup}; capturing handles take the errno state as first argument. */
    static MethodHandle bind(SymbolLookup lookup, String library, String name, boolean required,
                             FunctionDescriptor descriptor, Linker.Option... options) {
        Optional<MemorySegment> symbol = lookup.find(name);
        if (symbol.isPresent()) {
            return LINKER.downcallHandle(symbol.get(), descriptor, options);
        }
        if (required) {
            MISSING_REQUIRED.add(name);
        }
        MethodType type = LINKER.downcallHandle(descriptor, options).type().dropParameterTypes(0, 1);
        MethodHandle thrower = MethodHandles.throwException(type.returnType(), UnsupportedOperationException.class)
                .bindTo(new UnsupportedOperationException(name + " is not available: " + library
                        + " is not loaded or lacks it (" + NativeLibraries.description() + ")"));
        return MethodHandles.dropArguments(thrower, 0, type.parameterList());
    }

    /** An unbound handle: the function's address is its first argument (for function pointers). */
    static MethodHandle unbound(FunctionDescriptor descriptor, Linker.Option... options) {
        return LINKER.downcallHandle(descriptor, options);
    }

    /** Required symbols the loaded libraries lack (after {@link LibIbverbs} and {@link LibRdmacm} are initialised). */
    static List<String> missingRequired() {
        return List.copyOf(MISSING_REQUIRED);
    }
}
