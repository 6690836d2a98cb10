/*
 * mpi_hello: every rank prints one line, and writes its pid to the file
 * mpi_hello.rank<N> in the working directory, so that a test can check
 * that the trace gives each process the rank the program itself was
 * given. Built with mpicc; the test runs it with mpirun -np 4.
 */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int rank, size;
	char path[64];
	FILE *f;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("mpi_hello rank %d of %d\n", rank, size);
	snprintf(path, sizeof(path), "mpi_hello.rank%d", rank);
	f = fopen(path, "w");
	if (f != NULL) {
		fprintf(f, "%ld\n", (long)getpid());
		fclose(f);
	}
	MPI_Finalize();
	return 0;
}
