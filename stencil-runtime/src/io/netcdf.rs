//! NetCDF classic.
