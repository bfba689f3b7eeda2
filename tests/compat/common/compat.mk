# Build rules shared by the compat programs' Makefiles, written the way
# CANN's samples are: only ASCEND_HOME_PATH (and MPI, through mpicc/mpicxx or
# MPI_HOME) point at the installation; headers from include/, libraries from
# lib64/ (-lhccl -lascendcl). Each Makefile sets TARGET, SRC and SRC_LANG (c|cxx).
ifndef ASCEND_HOME_PATH
    $(error ASCEND_HOME_PATH is not set: point it at the zccl (or CANN) install prefix)
endif
MPICC ?= $(if $(MPI_HOME),$(MPI_HOME)/bin/mpicc,mpicc)
MPICXX ?= $(if $(MPI_HOME),$(MPI_HOME)/bin/mpicxx,mpicxx)

COMMON_FLAGS := -Werror -Wall -Wextra -O2 -fstack-protector-strong -fPIE -pie
# MPI is used from C (Open MPI's C++ bindings do not build with -Wextra -Werror).
CXXFLAGS := -std=c++11 $(COMMON_FLAGS) -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX
CFLAGS := -std=c11 -D_GNU_SOURCE $(COMMON_FLAGS)
INCS := -I$(ASCEND_HOME_PATH)/include -I../common
LIBS := -L$(ASCEND_HOME_PATH)/lib64 -lhccl -lascendcl -lpthread

ifeq ($(SRC_LANG),cxx)
COMPILE = $(MPICXX) $(CXXFLAGS)
else
COMPILE = $(MPICC) $(CFLAGS)
endif

# make test [N=ranks]: run it the way the samples' Makefiles do (the ctest
# driver, run.sh, adds the rank counts and the checks).
N ?= 8
MPIRUN ?= $(if $(MPI_HOME),$(MPI_HOME)/bin/mpirun,mpirun)
RUN ?= $(MPIRUN) -n $(N) ./$(TARGET)

all: $(TARGET)

test: $(TARGET)
	LD_LIBRARY_PATH=$(ASCEND_HOME_PATH)/lib64:$$LD_LIBRARY_PATH $(RUN)

$(TARGET): $(SRC) ../common/compat.h ../common/compat_mpi.h
	$(COMPILE) $(SRC) $(INCS) $(LIBS) -o $@

clean:
	rm -f $(TARGET)

.PHONY: all clean test
